package eventkey_test

import (
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/conformance"
	"github.com/idemhook/idemhook/eventkey"
)

func TestDeriveConformance(t *testing.T) {
	vectors, err := conformance.Vectors()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vectors {
		t.Run(v.Name, func(t *testing.T) {
			body, err := v.Body()
			if err != nil {
				t.Fatal(err)
			}
			header := http.Header{}
			for k, val := range v.Headers {
				header.Set(k, val)
			}
			got, err := eventkey.DeriveFor(eventkey.Preset(v.Preset), header, body, v.Scope)
			if v.Preset == "" && v.Form == nil && v.Clause != "form" {
				// The default preset is Derive itself, but for a form, which
				// Derive (it takes no header) hashes.
				plain, perr := eventkey.Derive(body)
				if plain != got || !errors.Is(perr, err) {
					t.Fatalf("Derive = %v, %v but DeriveFor = %v, %v", plain, perr, got, err)
				}
			}
			switch v.Error {
			case "empty_body":
				if !errors.Is(err, eventkey.ErrEmptyBody) {
					t.Fatalf("DeriveFor = %q, %v; want ErrEmptyBody", got.Value, err)
				}
				return
			case "invalid_scope":
				if !errors.Is(err, eventkey.ErrInvalidScope) {
					t.Fatalf("DeriveFor = %q, %v; want ErrInvalidScope", got.Value, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Derive: %v", err)
			}
			if got.Value != v.Key || string(got.Source) != v.Source {
				t.Fatalf("Derive = %q (%s), want %q (%s)", got.Value, got.Source, v.Key, v.Source)
			}
		})
	}
}

func TestValidID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{"evt_1", true},
		{"", false},
		{strings.Repeat("a", 255), true},
		{strings.Repeat("a", 256), false},
		{"a\x00", false},
		{"a\x7f", false},
		{"a\u0080", true},
		{"\xff", false},
		{"🦄", true},
	} {
		if got := eventkey.ValidID(tc.id); got != tc.want {
			t.Errorf("ValidID(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
}

func FuzzDerive(f *testing.F) {
	vectors, err := conformance.Vectors()
	if err != nil {
		f.Fatal(err)
	}
	for _, v := range vectors {
		if b, err := v.Body(); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		k, err := eventkey.Derive(body)
		if len(body) == 0 {
			if !errors.Is(err, eventkey.ErrEmptyBody) {
				t.Fatalf("empty body: err = %v", err)
			}
			return
		}
		switch k.Source {
		case eventkey.SourceEventID:
			id := strings.TrimPrefix(k.Value, eventkey.EventIDPrefix)
			if !eventkey.ValidID(id) {
				t.Fatalf("derived an invalid id %q", id)
			}
		case eventkey.SourceBodySHA256:
			if k.Value != eventkey.HashKey(body) {
				t.Fatalf("hash key %q", k.Value)
			}
		default:
			t.Fatalf("source %q", k.Source)
		}
	})
}

// CannotBeObject decides from a prefix only what the spec decides from the
// whole body: for every prefix of every vector's body for which it holds,
// the vector's key is not an event id, and DeriveForSummed given that
// prefix and the whole body's SHA-256 gives the vector's key.
func TestCannotBeObjectAgreesWithTheVectors(t *testing.T) {
	vectors, err := conformance.Vectors()
	if err != nil {
		t.Fatal(err)
	}
	decided := 0
	for _, v := range vectors {
		body, err := v.Body()
		if err != nil || v.Error != "" {
			continue
		}
		header := http.Header{}
		for k, val := range v.Headers {
			header.Set(k, val)
		}
		if eventkey.IsMultipart(header.Get("Content-Type")) {
			continue // a form's key needs the whole body (see Summed)
		}
		sum := eventkey.Summed{Sum: sha256.Sum256(body), OK: true}
		for n := 0; n <= len(body) && n <= 8; n++ {
			if !eventkey.CannotBeObject(body[:n]) {
				continue
			}
			decided++
			if v.Source == string(eventkey.SourceEventID) {
				t.Errorf("%s: CannotBeObject(%q) holds, but the body's key is its id %s", v.Name, body[:n], v.Key)
			}
			got, err := eventkey.DeriveForSummed(eventkey.Preset(v.Preset), header, body[:n], sum, v.Scope)
			if err != nil || got.Value != v.Key || string(got.Source) != v.Source {
				t.Errorf("%s: from the prefix %q: %v (%s), %v; want %s (%s)", v.Name, body[:n], got.Value, got.Source, err, v.Key, v.Source)
			}
		}
	}
	if decided == 0 {
		t.Fatal("no vector has a prefix that CannotBeObject decides")
	}
}

func TestCannotBeObject(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		want   bool
	}{
		{"", false}, {"  \t\r\n", false}, {"{", false}, {"  {", false},
		{"\xEF", false}, {"\xEF\xBB", false}, {"\xEF\xBB\xBF", false}, {"\xEF\xBB\xBF {", false},
		{"[", true}, {" x", true}, {"\"id\"", true}, {"\xEF\xBB\xBF[", true}, {"\xEFx", true},
		{"\xEF\xBB\xBF\xEF\xBB\xBF{", true}, // one BOM only
		{"\f{", true},                       // form feed is not JSON whitespace
	} {
		if got := eventkey.CannotBeObject([]byte(tc.prefix)); got != tc.want {
			t.Errorf("CannotBeObject(%q) = %v, want %v", tc.prefix, got, tc.want)
		}
	}
}
