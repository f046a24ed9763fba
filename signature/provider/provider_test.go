package provider_test

import (
	"net/textproto"
	"slices"
	"testing"

	"github.com/idemhook/idemhook/signature/provider"
)

// Every entry of the table is complete and reads as its readers assume:
// one name, once; canonical header names where a reader compares them as
// given; a key preset that reads its id from headers or from the body, not
// both; a Crypto node encoding n8n has, or why a
// workflow cannot check the signature.
func TestTableIsWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range provider.All {
		if p.Name == "" || p.Title == "" || p.Label == "" || seen[p.Name] {
			t.Errorf("%+v: want a name, once, a title and a label", p)
		}
		seen[p.Name] = true
		if len(p.SignatureHeaders) == 0 {
			t.Errorf("%s: no signature header", p.Name)
		}
		for _, h := range append(append([]string{}, p.SignatureHeaders...), p.Key.IDHeaders...) {
			if h != textproto.CanonicalMIMEHeaderKey(h) {
				t.Errorf("%s: header %q is not in canonical form", p.Name, h)
			}
		}
		if p.Key.ScopeHeader != "" && p.Key.ScopeHeader != textproto.CanonicalMIMEHeaderKey(p.Key.ScopeHeader) {
			t.Errorf("%s: scope header %q is not in canonical form", p.Name, p.Key.ScopeHeader)
		}
		k := p.Key
		if k.Prefix != "" && (len(k.IDHeaders) > 0) == (k.IDMember != "") {
			t.Errorf("%s: key preset %+v must read its id from headers or from a body member", p.Name, k)
		}
		if k.Prefix == "" && (len(k.IDHeaders) > 0 || k.IDMember != "" || k.ScopeHeader != "") {
			t.Errorf("%s: key preset %+v reads an id but has no prefix", p.Name, k)
		}
		if !slices.Contains([]string{"hex", "base64"}, p.WorkflowHMAC) && p.WorkflowCannot == "" {
			t.Errorf("%s: WorkflowHMAC %q is no encoding of n8n's Crypto node, and WorkflowCannot says nothing", p.Name, p.WorkflowHMAC)
		}
		if p.WorkflowHMAC != "" && p.WorkflowCannot != "" {
			t.Errorf("%s: a workflow checks its signature and cannot", p.Name)
		}
		for _, s := range []provider.Source{p.Type, p.Account} {
			if s.Header != "" && len(s.Body) > 0 {
				t.Errorf("%s: source %+v names a header and a body path", p.Name, s)
			}
		}
		if none(p.Type) && !none(p.Account) {
			t.Errorf("%s: an account source without a type source", p.Name)
		}
	}
}

func none(s provider.Source) bool { return s.Header == "" && len(s.Body) == 0 }
