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
	"strings"

	"github.com/idemhook/idemhook/eventkey"
)

// Scope is what a token may do. ScopeAdmin includes the others.
type Scope string

const (
	// ScopeReserve derives, reserves and looks up keys, and verifies.
	ScopeReserve Scope = "reserve"
	// ScopeRead views the console: the inbox's counts and entries with
	// their history and headers, never a body, and changes nothing.
	ScopeRead Scope = "read"
	// ScopeAdmin also releases keys, marks them done, reads bodies and
	// replays or retries the inbox: what turns a processed event into one
	// that runs again.
	ScopeAdmin Scope = "admin"
)

func (s Scope) covers(need Scope) bool {
	return need == "" || s == ScopeAdmin || s == need
}

// Token is one accepted bearer token, known by its SHA-256 only.
type Token struct {
	Name  string
	Scope Scope
	hash  [sha256.Size]byte
	// Prefix, when set, binds the token to one tenant's keys: it reserves
	// only keys that start with Prefix and cannot see any other.
	Prefix string
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

// ParseTokens reads a tokens file: one token a line, "name scope sha256"
// and an optional key prefix (the tenant), fields separated by spaces; blank
// lines and lines starting with # are skipped. The file holds the SHA-256 of
// each token (`printf %s "$TOKEN" | sha256sum`), never a token in the clear.
func ParseTokens(r io.Reader) (*Tokens, error) {
	t := &Tokens{}
	sc := bufio.NewScanner(r)
	names := map[string]bool{}
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 || len(f) > 4 {
			return nil, fmt.Errorf("tokens file line %d: want \"name scope sha256 [key-prefix]\"", n)
		}
		tok := Token{Name: f[0], Scope: Scope(f[1])}
		if tok.Scope != ScopeReserve && tok.Scope != ScopeRead && tok.Scope != ScopeAdmin {
			return nil, fmt.Errorf("tokens file line %d: scope %q: use reserve, read or admin", n, f[1])
		}
		raw, err := hex.DecodeString(f[2])
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("tokens file line %d: the third field must be the token's SHA-256 in hex (64 characters), never the token", n)
		}
		copy(tok.hash[:], raw)
		if len(f) == 4 {
			if !eventkey.ValidKey(f[3]) {
				return nil, fmt.Errorf("tokens file line %d: key prefix %q is not a key's beginning", n, f[3])
			}
			tok.Prefix = f[3]
		}
		if names[tok.Name] {
			return nil, fmt.Errorf("tokens file line %d: the name %q is used twice", n, tok.Name)
		}
		names[tok.Name] = true
		t.list = append(t.list, tok)
	}
	return t, sc.Err()
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

// Errors of authentication, each with the answer it gets.
var (
	errNoToken    = errors.New("missing or unknown bearer token")
	errNeedsScope = errors.New("the token lacks the scope")
)

type tokenKey struct{}

// tokenOf returns the token that authenticated the request (nil when keysvc
// runs without tokens, or the route needs none).
func tokenOf(r *http.Request) *Token {
	t, _ := r.Context().Value(tokenKey{}).(*Token)
	return t
}

// authenticate checks the bearer token against the route's scope. It
// returns the request carrying its token.
func (s *Server) authenticate(r *http.Request, need Scope) (*http.Request, error) {
	tokens := s.tokens.Load()
	if need == "" || tokens.Len() == 0 {
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
		return r, errNeedsScope
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

// ownsKey reports whether the request's token may see key: a tenant token
// only the keys under its prefix.
func ownsKey(r *http.Request, key string) bool {
	tok := tokenOf(r)
	return tok == nil || strings.HasPrefix(key, tok.Prefix)
}

// SetTokens replaces the accepted tokens, at once for every new request
// (keysvc re-reads its tokens file on SIGHUP).
func (s *Server) SetTokens(t *Tokens) { s.tokens.Store(t) }
