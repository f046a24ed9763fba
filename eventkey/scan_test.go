package eventkey

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

func special(c byte) bool { return c == '"' || c == '\\' || c < 0x20 }

// specialBytes against the byte-at-a-time rule: every byte value at every
// position of a plain word, then random words (high bytes included, where
// the bit tests could be fooled).
func TestSpecialBytes(t *testing.T) {
	for pos := range 8 {
		for c := range 256 {
			w := []byte("aaaaaaaa")
			w[pos] = byte(c)
			if got := specialBytes(binary.LittleEndian.Uint64(w)) != 0; got != special(byte(c)) {
				t.Errorf("byte %#x at %d: specialBytes says %v", c, pos, got)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{'"', '\\', 0x00, 0x1f, 0x20, 0x21, 0x5b, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff, 'a'}
	for range 200000 {
		var w [8]byte
		want := false
		for i := range w {
			if r.IntN(2) == 0 {
				w[i] = alphabet[r.IntN(len(alphabet))]
			} else {
				w[i] = byte(r.IntN(256))
			}
			want = want || special(w[i])
		}
		if got := specialBytes(binary.LittleEndian.Uint64(w[:])) != 0; got != want {
			t.Fatalf("%q: specialBytes says %v, want %v", w, got, want)
		}
	}
}

// plainEnd stops where a byte-at-a-time loop stops, from any start, with
// runs long enough for its 32- and 8-byte steps.
func TestPlainEnd(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		data := make([]byte, r.IntN(120))
		for i := range data {
			data[i] = 'a' + byte(r.IntN(26))
			if r.IntN(60) == 0 {
				data[i] = byte(r.IntN(256))
			}
		}
		start := 0
		if len(data) > 0 {
			start = r.IntN(len(data) + 1)
		}
		want := start
		for want < len(data) && !special(data[want]) {
			want++
		}
		if got := plainEnd(data, start); got != want {
			t.Fatalf("plainEnd(%q, %d) = %d, want %d", data, start, got, want)
		}
	}
}
