package eventkey

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/idemhook/idemhook/signature/provider"
)

// Preset names where a provider puts the id that stays the same across its
// retries. The default (and Stripe) is the body's "id"; other providers put
// it in a header or under another name. See "Provider presets" in
// docs/key-spec.md.
type Preset string

const (
	PresetDefault          Preset = ""
	PresetStripe           Preset = provider.Stripe           // the body's id: the default spec
	PresetStandardWebhooks Preset = provider.StandardWebhooks // webhook-id (or svix-id) header
	PresetGitHub           Preset = provider.GitHub           // X-GitHub-Delivery, scoped by X-GitHub-Hook-ID
	PresetShopify          Preset = provider.Shopify          // X-Shopify-Webhook-Id, scoped by X-Shopify-Shop-Domain
	PresetSlack            Preset = provider.Slack            // the body's top-level event_id
)

// Header is what DeriveFor reads of a request's headers: http.Header has it,
// and so does the planner page's WebAssembly build, which does without
// net/http (and its megabytes).
type Header interface {
	Get(name string) string
}

// SourceProviderID marks a key built from a preset's provider id.
const SourceProviderID Source = "provider_id"

// Errors of DeriveFor.
var (
	ErrUnknownPreset = errors.New("unknown key preset")
	ErrInvalidScope  = errors.New("invalid key scope")
)

// MaxScopeBytes bounds a preset's scope.
const MaxScopeBytes = 64

var scopePattern = regexp.MustCompile(`^[A-Za-z0-9._-]*$`)

// presetRules are the presets that read a provider's own delivery id (the
// table of package provider); the stripe and default presets are the spec's
// own clauses.
var presetRules = func() map[Preset]provider.Key {
	out := map[Preset]provider.Key{}
	for _, p := range provider.All {
		if p.Key.Prefix != "" {
			out[Preset(p.Name)] = p.Key
		}
	}
	return out
}()

// ParsePreset returns the preset named s ("" is the default).
func ParsePreset(s string) (Preset, error) {
	// Every provider is a preset; one whose deliveries carry no id of their
	// own (Stripe's is the body's id) reads the key as the default does.
	if _, ok := provider.Lookup(s); ok || s == "" {
		return Preset(s), nil
	}
	return "", fmt.Errorf("%w %.40q: use %s", ErrUnknownPreset, s, provider.List())
}

// MaxKeyBytes bounds every key this package derives: the longest preset
// prefix, a scope, and an id ("shopify:" + 64 + ":" + 255 bytes). Keys from
// the default spec are shorter (evt: + 255, or sha256: + 64).
const MaxKeyBytes = len("shopify") + 1 + MaxScopeBytes + 1 + MaxIDBytes

// ValidKey reports whether key could have been derived here, or given by a
// caller as its own id: 1 to MaxKeyBytes bytes of valid UTF-8 with no control
// character. It is the one check of a key that comes back from outside (a
// key in a URL path, for one).
func ValidKey(key string) bool {
	return len(key) <= MaxKeyBytes && validBytes(key)
}

// ValidScope reports whether scope may prefix a key: at most MaxScopeBytes
// of letters, digits, '.', '_' and '-'.
func ValidScope(scope string) bool {
	return len(scope) <= MaxScopeBytes && scopePattern.MatchString(scope)
}

// CheckScope reports whether p accepts scope: an unknown preset fails with
// ErrUnknownPreset, a scope that ValidScope refuses, or any scope for the
// stripe and default presets, with ErrInvalidScope.
func (p Preset) CheckScope(scope string) error {
	if _, err := ParsePreset(string(p)); err != nil {
		return err
	}
	if !ValidScope(scope) {
		return fmt.Errorf("%w %.80q: at most %d letters, digits, '.', '_' or '-'", ErrInvalidScope, scope, MaxScopeBytes)
	}
	if !p.Scoped() && scope != "" {
		if p == PresetDefault {
			return fmt.Errorf("%w: the default key (the body's id, or its hash) takes no scope", ErrInvalidScope)
		}
		return fmt.Errorf("%w: the %q preset takes no scope (its event ids are unique)", ErrInvalidScope, string(p))
	}
	return nil
}

// Scoped reports whether p takes a scope: the presets that read a delivery
// id of their own (a header, or slack's event_id).
func (p Preset) Scoped() bool {
	_, ok := presetRules[p]
	return ok
}

// DeriveFor returns the key of a delivery under preset p. A header preset
// gives "<prefix>:<scope>:<id>", where scope is the given one, else the
// preset's scope header, else empty; slack reads the body's event_id the
// same way. When the provider's id is absent or unusable (not 1-255 bytes of
// UTF-8 without control characters), the key falls back to the spec's own
// clauses: the form's key for a multipart/form-data body (its Content-Type
// header says so; see ParseForm), else Derive(body). The stripe and default
// presets are those clauses and take no scope. The errors are
// ErrUnknownPreset, ErrInvalidScope, ErrEmptyBody and ErrEmptyForm.
func DeriveFor(p Preset, header Header, body []byte, scope string) (Key, error) {
	return DeriveForSummed(p, header, body, Summed{}, scope)
}

// DeriveForSummed is DeriveFor for a body whose SHA-256 the caller may have
// computed already (see Summed).
func DeriveForSummed(p Preset, header Header, body []byte, sum Summed, scope string) (Key, error) {
	if err := p.CheckScope(scope); err != nil {
		return Key{}, err
	}
	rule, ok := presetRules[p]
	if !ok {
		return deriveBody(header, body, sum)
	}
	var id string
	for _, h := range rule.IDHeaders {
		if id = header.Get(h); id != "" {
			break
		}
	}
	usable := ValidHeaderID(id)
	if rule.IDMember != "" {
		id, usable = scanMember(body, rule.IDMember)
	}
	if !usable {
		return deriveBody(header, body, sum)
	}
	if scope == "" && rule.ScopeHeader != "" {
		if s := header.Get(rule.ScopeHeader); ValidScope(s) {
			scope = s
		}
	}
	return Key{Value: strings.Join([]string{rule.Prefix, scope, id}, ":"), Source: SourceProviderID}, nil
}

// deriveBody is the spec's own clauses: a multipart form by its form, any
// other body by Derive.
func deriveBody(header Header, body []byte, sum Summed) (Key, error) {
	if header != nil {
		if f, ok := ParseForm(header.Get("Content-Type"), body); ok {
			return f.Key()
		}
	}
	return derive(body, sum)
}

// ValidHeaderID reports whether a header's value may serve as an id (or an
// account): ValidID, and printable ASCII, because HTTP stacks decode other
// header bytes differently (Node as Latin-1) and implementations would
// disagree.
func ValidHeaderID(v string) bool { return ValidID(v) && printableASCII(v) }

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// Headers lists the request headers p reads (the id and the default scope),
// in canonical form, so that a caller relaying a request to keysvc knows
// what to forward.
func (p Preset) Headers() []string {
	rule := presetRules[p]
	out := append([]string{}, rule.IDHeaders...)
	if rule.ScopeHeader != "" {
		out = append(out, rule.ScopeHeader)
	}
	return out
}
