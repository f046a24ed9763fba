package keysvc

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/signature"
)

// Scope is what a token may do. ScopeAdmin includes the others.
type Scope string

const (
	// ScopeReserve derives, reserves and looks up keys, and verifies.
	ScopeReserve Scope = "reserve"
	// ScopeGuard is exactly what an idempotency guard does, the
	// Idempotency Guard node's operations: reserve a key or acquire its
	// lease, mark it done, release it. It reads no body, views no console
	// and replays nothing: the token to store in an n8n you do not run.
	ScopeGuard Scope = "guard"
	// ScopeRead views the console: the inbox's counts and entries with
	// their history and headers, never a body, and changes nothing.
	ScopeRead Scope = "read"
	// ScopeAdmin also releases keys, marks them done, reads bodies and
	// replays or retries the inbox: what turns a processed event into one
	// that runs again.
	ScopeAdmin Scope = "admin"
)

// Scopes are the scopes a token may have.
var Scopes = []Scope{ScopeReserve, ScopeGuard, ScopeRead, ScopeAdmin}

// ScopeNames names every scope for a sentence, from Scopes: "reserve,
// guard, read or admin" (keysvc --help and ParseScope's error say it, so
// neither drifts from the list).
func ScopeNames() string {
	names := make([]string, len(Scopes))
	for i, sc := range Scopes {
		names[i] = string(sc)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// ParseScope returns the scope named s.
func ParseScope(s string) (Scope, error) {
	for _, sc := range Scopes {
		if string(sc) == s {
			return sc, nil
		}
	}
	return "", fmt.Errorf("scope %.40q: use %s", s, ScopeNames())
}

// covers reports whether a token of scope s may use a route open to any of
// need: admin may use every route.
func (s Scope) covers(need []Scope) bool {
	return s == ScopeAdmin || slices.Contains(need, s)
}

// describeScopes names the scopes of a route that needs one of them, for an
// answer: "the guard scope (or admin)", "the reserve or guard scope (or
// admin)".
func describeScopes(need []Scope) string {
	var names []string
	for _, sc := range need {
		if sc != ScopeAdmin {
			names = append(names, string(sc))
		}
	}
	if len(names) == 0 {
		return "the admin scope"
	}
	return "the " + strings.Join(names, " or ") + " scope (or admin)"
}

// MaxTenantPrefixBytes bounds a tenant's key prefix: the keys keysvc
// stores are then at most eventkey.MaxKeyBytes + MaxTenantPrefixBytes.
const MaxTenantPrefixBytes = 64

// Token is one accepted bearer token, known by its SHA-256 only.
type Token struct {
	Name  string
	Scope Scope
	hash  [sha256.Size]byte
	// Prefix, when set, gives the token a tenant's key space of its own:
	// keysvc stores every key the token derives or names as Prefix + key
	// (a key that already begins with Prefix as it is, see storedKey) and
	// answers the key as named or derived, so the tenant sees the spec's
	// keys and no other tenant's. Two tenants receiving the same event
	// (one Stripe event sent to two endpoints) hold two keys.
	Prefix string
	// Provider, when set, binds the token to one provider: it reserves
	// only deliveries whose signature keysvc verified (?provider= naming
	// it), never a key of its own, so a leaked token cannot pre-reserve a
	// real event id.
	Provider signature.Provider
}

// Tokens is a set of accepted tokens. The zero value accepts none.
type Tokens struct{ list []Token }

// Len is the number of tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.list)
}

// ParseTokens reads a tokens file: one token a line, "name scope sha256",
// then optionally the tenant's key prefix (bare, or prefix=P) and
// provider=NAME, fields separated by spaces; blank lines and lines starting
// with # are skipped. The file holds the SHA-256 of each token (`printf %s
// "$TOKEN" | sha256sum | cut -d' ' -f1`), never a token in the clear.
func ParseTokens(r io.Reader) (*Tokens, error) {
	t := &Tokens{}
	sc := bufio.NewScanner(r)
	names := map[string]bool{}
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		tok, err := parseTokenLine(strings.Fields(line))
		if err != nil {
			return nil, fmt.Errorf("tokens file line %d: %w", n, err)
		}
		if names[tok.Name] {
			return nil, fmt.Errorf("tokens file line %d: the name %q is used twice", n, tok.Name)
		}
		names[tok.Name] = true
		t.list = append(t.list, tok)
	}
	return t, sc.Err()
}

// parseTokenLine reads one line's fields. Its errors never repeat the
// third field, which may be a token pasted in the clear.
func parseTokenLine(f []string) (Token, error) {
	if len(f) < 3 || len(f) > 5 {
		return Token{}, errors.New(`want "name scope sha256 [key-prefix] [provider=NAME]"`)
	}
	scope, err := ParseScope(f[1])
	if err != nil {
		return Token{}, err
	}
	tok := Token{Name: f[0], Scope: scope}
	raw, err := hex.DecodeString(f[2])
	if err != nil || len(raw) != sha256.Size {
		return Token{}, errors.New("the third field must be the token's SHA-256 in hex (64 characters), never the token")
	}
	copy(tok.hash[:], raw)
	for _, opt := range f[3:] {
		switch name, value, _ := strings.Cut(opt, "="); {
		case opt == "-":
			// sha256sum prints "HASH  -": its file-name column pasted
			// along would make every key start with "-".
			return Token{}, errors.New(`"-" is sha256sum's file-name column, not a key prefix: write the hash alone (sha256sum | cut -d' ' -f1)`)
		case name == "provider":
			p, err := signature.ParseProvider(value)
			if err != nil || tok.Provider != "" {
				return Token{}, fmt.Errorf("provider=%.40q: name one provider idemhook verifies (%v)", value, err)
			}
			tok.Provider = p
		case name == "prefix" || !strings.Contains(opt, "="):
			if name == "prefix" {
				opt = value
			}
			if tok.Prefix != "" || opt == "" || len(opt) > MaxTenantPrefixBytes || !eventkey.ValidKey(opt) {
				return Token{}, fmt.Errorf("key prefix %.80q: one prefix of 1-%d bytes with no space or control character", opt, MaxTenantPrefixBytes)
			}
			tok.Prefix = opt
		default:
			return Token{}, fmt.Errorf("%.40q: a field after the hash is a key prefix or provider=NAME", opt)
		}
	}
	return tok, nil
}

// FullToken is KEYSVC_TOKEN: one admin token for every key.
func FullToken(token string) *Tokens {
	return &Tokens{list: []Token{{Name: "KEYSVC_TOKEN", Scope: ScopeAdmin, hash: sha256.Sum256([]byte(token))}}}
}

// Merge returns a set with the tokens of both.
func (t *Tokens) Merge(o *Tokens) *Tokens {
	out := &Tokens{}
	if t != nil {
		out.list = append(out.list, t.list...)
	}
	if o != nil {
		out.list = append(out.list, o.list...)
	}
	return out
}

// match returns the token whose hash is the bearer's. Every token is
// compared, in constant time, so the time does not tell which matched or
// how far a guess got.
func (t *Tokens) match(bearer string) *Token {
	got := sha256.Sum256([]byte(bearer))
	var found *Token
	for i := range t.list {
		if subtle.ConstantTimeCompare(got[:], t.list[i].hash[:]) == 1 {
			found = &t.list[i]
		}
	}
	return found
}

// errNoToken is a request without a token keysvc knows: 401.
var errNoToken = errors.New("missing or unknown bearer token")

// scopeError is a token whose scope does not allow what it asked: 403,
// saying what it has and what it needs.
type scopeError struct {
	has  Scope
	need []Scope
}

func (e *scopeError) Error() string {
	return fmt.Sprintf("this token has the %s scope; this needs %s", e.has, describeScopes(e.need))
}

// scopeList is need as WWW-Authenticate's scope parameter: space-separated.
func scopeList(need []Scope) string {
	names := make([]string, 0, len(need)+1)
	for _, sc := range need {
		names = append(names, string(sc))
	}
	if !slices.Contains(need, ScopeAdmin) {
		names = append(names, string(ScopeAdmin))
	}
	return strings.Join(names, " ")
}

type tokenKey struct{}

// tokenOf returns the token that authenticated the request (nil when keysvc
// runs without tokens, or the route needs none).
func tokenOf(r *http.Request) *Token {
	t, _ := r.Context().Value(tokenKey{}).(*Token)
	return t
}

// authenticate checks the bearer token against the route's scopes (any of
// need; none: an open route). It returns the request carrying its token.
func (s *Server) authenticate(r *http.Request, need []Scope) (*http.Request, error) {
	tokens := s.tokens.Load()
	if len(need) == 0 || tokens.Len() == 0 {
		return r, nil
	}
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return r, errNoToken
	}
	tok := tokens.match(h[len(prefix):])
	if tok == nil {
		return r, errNoToken
	}
	if !tok.Scope.covers(need) {
		return r, &scopeError{has: tok.Scope, need: need}
	}
	return r.WithContext(context.WithValue(r.Context(), tokenKey{}, tok)), nil
}

// actorOf names who made the request, for an entry's history: the token's
// name ("" when keysvc runs without tokens).
func actorOf(r *http.Request) string {
	if tok := tokenOf(r); tok != nil {
		return tok.Name
	}
	return ""
}

// storedKey is where the store holds key for the request's token: in its
// tenant's key space, or key itself for a token of no tenant. Every key a
// request names or derives goes through it, so a tenant can neither see nor
// touch another's keys.
//
// A key that already begins with the tenant's prefix is stored as it is:
// before tenants had key spaces of their own, a tenant's token could only
// name keys under its prefix, stored as sent ("shop-a:evt_1"), and the same
// request must find the same reservation after an upgrade and after a
// downgrade. Any other key gets the prefix in front. So a tenant's "evt_1"
// and "shop-a:evt_1" are one key (docs/keysvc.md, Tenants).
func storedKey(r *http.Request, key string) string {
	tok := tokenOf(r)
	if tok == nil || strings.HasPrefix(key, tok.Prefix) {
		return key
	}
	return tok.Prefix + key
}

// SetTokens replaces the accepted tokens, at once for every new request
// (keysvc re-reads its tokens file on SIGHUP).
func (s *Server) SetTokens(t *Tokens) { s.tokens.Store(t) }

// whoAmI is GET /v1/token: the token's name, scope and tenant. With
// ?scope=, 403 unless the token allows that scope, saying what it has: what
// a client checks its token with before it relies on it (the Idempotency
// Guard node's credential test asks for guard).
func (s *Server) whoAmI(w http.ResponseWriter, r *http.Request) error {
	who := struct {
		Name     string             `json:"name"`
		Scope    Scope              `json:"scope"`
		Prefix   string             `json:"tenant_prefix,omitempty"`
		Provider signature.Provider `json:"provider,omitempty"`
	}{Scope: ScopeAdmin} // keysvc without tokens lets every caller do everything
	if tok := tokenOf(r); tok != nil {
		who.Name, who.Scope, who.Prefix, who.Provider = tok.Name, tok.Scope, tok.Prefix, tok.Provider
	}
	if q := r.URL.Query(); q.Has("scope") {
		need, err := ParseScope(q.Get("scope"))
		if err != nil {
			return httpError(http.StatusBadRequest, "invalid_scope", "%v", err)
		}
		if !who.Scope.covers([]Scope{need}) {
			return &statusError{Status: http.StatusForbidden, Code: "forbidden", Msg: (&scopeError{has: who.Scope, need: []Scope{need}}).Error()}
		}
	}
	writeJSON(w, http.StatusOK, who)
	return nil
}
