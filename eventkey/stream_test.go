package eventkey_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/conformance"
	"github.com/idemhook/idemhook/eventkey"
)

// streamedInPieces writes body to a Streamed in pieces of random sizes,
// one-byte pieces included.
func streamedInPieces(body []byte, r *rand.Rand) *eventkey.Streamed {
	s := eventkey.NewStreamed()
	for rest := body; len(rest) > 0; {
		n := 1
		if r.IntN(3) > 0 {
			n = 1 + r.IntN(len(rest))
		}
		n = min(n, len(rest))
		_, _ = s.Write(rest[:n])
		rest = rest[n:]
	}
	return s
}

// agree checks DeriveForStreamed against DeriveFor for body under every
// preset, the body written in pieces.
func agree(t *testing.T, body []byte, header http.Header, r *rand.Rand) {
	t.Helper()
	presets := []eventkey.Preset{eventkey.PresetDefault, eventkey.PresetSlack, eventkey.PresetGitHub, eventkey.PresetStandardWebhooks}
	for _, p := range presets {
		want, wantErr := eventkey.DeriveFor(p, header, body, "")
		got, err := eventkey.DeriveForStreamed(p, header, streamedInPieces(body, r), "")
		if got != want || !errors.Is(err, wantErr) && (err != nil || wantErr != nil) {
			t.Fatalf("preset %q, body %q: streamed %v, %v; held %v, %v", p, truncate(body), got, err, want, wantErr)
		}
	}
}

func truncate(b []byte) []byte {
	if len(b) > 200 {
		return append(append([]byte{}, b[:200]...), "…"...)
	}
	return b
}

// Every shared vector (but the multipart forms, keyed by their whole form)
// gets the same key streamed as held, in pieces of any size.
func TestStreamedAgreesOnTheVectors(t *testing.T) {
	vectors, err := conformance.Vectors()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(59, 2))
	for _, v := range vectors {
		body, err := v.Body()
		if err != nil {
			t.Fatal(err)
		}
		header := http.Header{}
		for k, val := range v.Headers {
			header.Set(k, val)
		}
		if eventkey.IsMultipart(header.Get("Content-Type")) {
			if _, err := eventkey.DeriveForStreamed("", header, streamedInPieces(body, r), ""); !errors.Is(err, eventkey.ErrStreamedForm) {
				t.Errorf("%s: a form streamed: %v", v.Name, err)
			}
			continue
		}
		for range 5 {
			agree(t, body, header, r)
		}
		want, wantErr := eventkey.DeriveFor(eventkey.Preset(v.Preset), header, body, v.Scope)
		got, err := eventkey.DeriveForStreamed(eventkey.Preset(v.Preset), header, streamedInPieces(body, r), v.Scope)
		if got != want || (err == nil) != (wantErr == nil) {
			t.Errorf("%s: streamed %v, %v; held %v, %v", v.Name, got, err, want, wantErr)
		}
	}
}

// JSON texts built to reach every turn of the grammar (escapes, surrogates
// paired and not, numbers, literals, nesting to the limit, a BOM, names
// escaped into "id"), then mutated byte by byte: the streamed key is the
// held one's, every time.
func TestStreamedAgreesOnGeneratedBodies(t *testing.T) {
	r := rand.New(rand.NewPCG(59, 3))
	pieces := []string{
		`"id"`, `"i\u0064"`, `"event_id"`, `"x"`, `"evt_1"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`, `"\ud83dx"`, `"\ud83d\n"`,
		`"\ud83d\u0041"`, `"a\"b"`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\u00e9"`, "\"é\"", `"` + strings.Repeat("z", 256) + `"`, `"` + strings.Repeat("z", 255) + `"`,
		`0`, `-0`, `12`, `-1.5e+3`, `1E9`, `0.25`, `01`, `1.`, `-`, `1e`, `true`, `false`, `null`, `tru`, `nul`,
		`{}`, `[]`, `[1,2]`, `{"a":{"id":"inner"}}`, `"\u0000"`, `"\u007f"`,
	}
	gen := func(depth int) string {
		var b strings.Builder
		var value func(d int)
		value = func(d int) {
			switch k := r.IntN(6); {
			case k == 0 && d < depth:
				b.WriteString("{")
				for i, n := 0, r.IntN(4); i < n; i++ {
					if i > 0 {
						b.WriteString(",")
					}
					b.WriteString(pieces[r.IntN(3)*1+r.IntN(2)*3] + ":")
					value(d + 1)
				}
				b.WriteString("}")
			case k == 1 && d < depth:
				b.WriteString("[")
				for i, n := 0, r.IntN(3); i < n; i++ {
					if i > 0 {
						b.WriteString(", ")
					}
					value(d + 1)
				}
				b.WriteString("]")
			default:
				b.WriteString(pieces[r.IntN(len(pieces))])
			}
		}
		b.WriteString("{")
		for i, n := 0, 1+r.IntN(4); i < n; i++ {
			if i > 0 {
				b.WriteString(" ,\n")
			}
			b.WriteString([]string{`"id"`, `"i\u0064"`, `"event_id"`, `"type"`, `"x"`}[r.IntN(5)] + " : ")
			value(1)
		}
		b.WriteString("}")
		return b.String()
	}
	for i := range 20000 {
		body := []byte(gen(3))
		switch i % 7 {
		case 1:
			body = append([]byte("\ufeff"), body...)
		case 2:
			body = append(append([]byte("\ufeff\ufeff"), body...), ' ')
		case 3, 4:
			for range 1 + r.IntN(3) {
				body[r.IntN(len(body))] = []byte{'"', '\\', '{', '}', ',', ':', 0x1f, 0xff, 0xc3, 'u', '0', ' '}[r.IntN(12)]
			}
		case 5:
			body = body[:r.IntN(len(body)+1)]
		}
		agree(t, body, http.Header{}, r)
	}
	// Nesting at the limit, and one deeper.
	for _, depth := range []int{eventkey.MaxDepth - 1, eventkey.MaxDepth} {
		body := []byte(`{"id":"deep","x":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`)
		agree(t, body, http.Header{}, r)
	}
}

// A streamed body is not kept: 16 MiB written in 64 KiB pieces leaves the
// process's heap where it was, give or take a piece.
func TestStreamedKeepsNoBody(t *testing.T) {
	body := append(append([]byte(`{"data":"`), bytes.Repeat([]byte("x"), 16<<20)...), `","id":"evt_big"}`...)
	s := eventkey.NewStreamed()
	for rest := body; len(rest) > 0; {
		n := min(len(rest), 64<<10)
		s.Write(rest[:n])
		rest = rest[n:]
	}
	k, err := eventkey.DeriveForStreamed("", http.Header{}, s, "")
	if err != nil || k.Value != "evt:evt_big" {
		t.Fatalf("%v, %v", k, err)
	}
	if n := testing.AllocsPerRun(3, func() {
		s := eventkey.NewStreamed()
		for rest := body; len(rest) > 0; {
			n := min(len(rest), 64<<10)
			s.Write(rest[:n])
			rest = rest[n:]
		}
	}); n > 100 {
		t.Errorf("%v allocations to stream 16 MiB", n)
	}
}

func FuzzStreamed(f *testing.F) {
	for _, seed := range []string{`{"id":"a"}`, "\ufeff{\"id\":\"\\ud83d\\ude00\"}", `{"event_id":"E1","id":7}`, `[{"id":"x"}]`, `{"id":"\ud83d"}`} {
		f.Add([]byte(seed), uint64(1))
	}
	f.Fuzz(func(t *testing.T, body []byte, seed uint64) {
		agree(t, body, http.Header{}, rand.New(rand.NewPCG(seed, 7)))
	})
}
