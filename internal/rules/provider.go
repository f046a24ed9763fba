package rules

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/signature/provider"
)

// Source is where a provider keeps one property of its events: a path
// into the body, or a request header.
type Source struct {
	Body   Path
	Header string
}

// Provider is what differs between webhook providers for the rules: where
// the event type and the account are, and which signature the receiver
// checks. A rules file names its provider; the rules themselves only read
// the body, so a new provider is an entry here, not a fork of the rules.
type Provider struct {
	Name string
	// Type is where the event type is. The receivers store the body's
	// "type" as inbox_events.event_type; a provider whose type is a header
	// has it read from the stored headers.
	Type Source
	// Account is where the event names its account (Stripe Connect's
	// "account"); events without one get the receiver's --account.
	Account Source
	// Verify is the signature the receiver checks by default
	// (signature.Provider's name).
	Verify string
}

// providers are the providers package provider's table says where their
// deliveries keep the event type (the others have no rules yet), with the
// account the event is about (the receipt is unique per account and
// delivery) and the signature the receiver checks (the provider's own).
var providers = func() []Provider {
	var out []Provider
	for _, p := range provider.All {
		if p.Type.Header == "" && len(p.Type.Body) == 0 {
			continue
		}
		out = append(out, Provider{Name: p.Name, Verify: p.Name,
			Type:    Source{Header: p.Type.Header, Body: Path(p.Type.Body)},
			Account: Source{Header: p.Account.Header, Body: Path(p.Account.Body)}})
	}
	return out
}()

// ProviderFor returns the provider called name (false when there is none).
func ProviderFor(name string) (Provider, bool) { return providerNamed(name) }

// Headers lists the request headers the provider's type and account are
// read from, which a receiver keeps with the receipt.
func (p Provider) Headers() []string {
	var out []string
	for _, s := range []Source{p.Type, p.Account} {
		if s.Header != "" {
			out = append(out, s.Header)
		}
	}
	return out
}

// TypeOf returns the event type of a delivery as the receivers store it in
// inbox_events.event_type ("" when the delivery names none); see
// Source.Value.
func (p Provider) TypeOf(header eventkey.Header, body []byte) string {
	t, _ := p.Type.Value(header, body)
	return t
}

// AccountOf returns the account a delivery names (false when it names none:
// the receiver's --account applies); see Source.Value.
func (p Provider) AccountOf(header eventkey.Header, body []byte) (string, bool) {
	return p.Account.Value(header, body)
}

// Value reads a delivery's value where s says, as every receiver does (the
// Code node script mirrors it, and a test holds the two to the same
// answers):
//   - a header: its value, when eventkey.ValidHeaderID accepts it;
//   - a one-member path: that top-level member of the body, under the key
//     spec's rules for the id (eventkey.Member);
//   - a longer path: the body, when it is a JSON object as the key spec
//     reads one (eventkey.IsObject); object members down the path; a string that ValidHeaderID
//     accepts, or a whole number from 0 to 2^53-1 (as JavaScript reads it)
//     in decimal digits: GitHub's installation.id is a number.
//
// Anything else is no value (false).
func (s Source) Value(header eventkey.Header, body []byte) (string, bool) {
	switch {
	case s.Header != "":
		v := header.Get(s.Header)
		return v, eventkey.ValidHeaderID(v)
	case len(s.Body) == 1:
		return eventkey.Member(body, s.Body[0])
	case len(s.Body) == 0:
		return "", false
	}
	var v any
	if !eventkey.IsObject(body) || json.Unmarshal(bytes.TrimPrefix(body, []byte("\xEF\xBB\xBF")), &v) != nil {
		return "", false
	}
	for _, seg := range s.Body {
		obj, ok := v.(map[string]any)
		if !ok {
			return "", false
		}
		if v, ok = obj[seg]; !ok {
			return "", false
		}
	}
	switch x := v.(type) {
	case string:
		return x, eventkey.ValidHeaderID(x)
	case float64:
		// json.Unmarshal rounds as JSON.parse does.
		if x >= 0 && x <= maxSafeInteger && x == math.Trunc(x) {
			return strconv.FormatInt(int64(x), 10), true
		}
	}
	return "", false
}

// maxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER.
const maxSafeInteger = 1<<53 - 1

// ProviderNames lists the providers a rules file may name.
func ProviderNames() []string {
	names := make([]string, len(providers))
	for i, p := range providers {
		names[i] = p.Name
	}
	return names
}

func providerNamed(name string) (Provider, bool) {
	i := slices.IndexFunc(providers, func(p Provider) bool { return p.Name == name })
	if i < 0 {
		return Provider{}, false
	}
	return providers[i], true
}

// StoredType reports whether the provider's type is what the receivers
// store in inbox_events.event_type (the body's top-level "type").
func (p Provider) StoredType() bool {
	return p.Type.Header == "" && len(p.Type.Body) == 1 && p.Type.Body[0] == "type"
}

// headerName is a source's header in lower case, as the receivers keep
// headers.
func (s Source) headerName() string { return strings.ToLower(s.Header) }
