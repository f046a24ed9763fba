package eventkey

import (
	"encoding/binary"
	"unicode/utf16"
	"unicode/utf8"
)

// The scanner is hand-written rather than built on encoding/json because the
// spec needs what encoding/json hides: unpaired surrogate escapes (it turns
// them into U+FFFD), a depth limit of 1000 (it allows 10000) and the exact
// decoded bytes of the id. The Code node script mirrors it function by
// function so the two stay easy to compare.

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// scanMember returns the last top-level string member called name, under
// the id clause of the spec.
func scanMember(body []byte, name string) (string, bool) {
	s, rule := scan(body, name)
	if rule != "" {
		return "", false
	}
	return s.id, s.idUsable
}

// scan runs the id clause over body for member name. rule is empty when the
// body is one JSON object whose member name was found (usable or not: see
// s.idUsable), else why not.
func scan(body []byte, name string) (s scanner, rule Rule) {
	if !utf8.Valid(body) {
		return s, RuleInvalidUTF8
	}
	if len(body) >= 3 && body[0] == utf8BOM[0] && body[1] == utf8BOM[1] && body[2] == utf8BOM[2] {
		body = body[3:]
	}
	s = scanner{data: body, member: name}
	s.skipSpace()
	object := s.peek() == '{'
	ok := s.value(0)
	s.skipSpace()
	switch {
	case s.tooDeep:
		return s, RuleTooDeep
	case !ok || s.pos != len(s.data):
		return s, RuleNotJSON
	case !object:
		return s, RuleNotObject
	case !s.idFound:
		return s, RuleNoID
	}
	return s, ""
}

func validID(id string) bool {
	return len(id) <= MaxIDBytes && validBytes(id)
}

// validBytes: non-empty valid UTF-8 with no control character.
func validBytes(s string) bool {
	if len(s) == 0 || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7F {
			return false
		}
	}
	return true
}

type scanner struct {
	data   []byte
	pos    int
	member string // the top-level member sought: "id" for the spec

	// The last top-level "id" member seen: whether there was one, its
	// decoded value when it is a string, and whether that value is usable.
	idFound  bool
	id       string
	idUsable bool
	// For Explain: the first byte of the last id member's value ('"' for a
	// string), whether that string had an unpaired surrogate, and whether
	// the scan stopped at MaxDepth.
	idStart  byte
	idPaired bool
	tooDeep  bool
}

func (s *scanner) peek() byte {
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// value scans one JSON value; depth counts the arrays and objects around it.
func (s *scanner) value(depth int) bool {
	s.skipSpace()
	switch c := s.peek(); {
	case c == '{':
		return s.object(depth + 1)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		return s.skipStr()
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	default:
		return false
	}
}

func (s *scanner) object(depth int) bool {
	if depth > MaxDepth {
		s.tooDeep = true
		return false
	}
	s.pos++ // '{'
	s.skipSpace()
	if s.peek() == '}' {
		s.pos++
		return true
	}
	for {
		s.skipSpace()
		if s.peek() != '"' {
			return false
		}
		// Only top-level names are compared; deeper ones are only checked.
		var name string
		ok := true
		if depth == 1 {
			name, _, ok = s.str()
		} else {
			ok = s.skipStr()
		}
		if !ok {
			return false
		}
		s.skipSpace()
		if s.peek() != ':' {
			return false
		}
		s.pos++
		s.skipSpace()
		if depth == 1 && name == s.member {
			if !s.idMember() {
				return false
			}
		} else if !s.value(depth) {
			return false
		}
		s.skipSpace()
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return true
		default:
			return false
		}
	}
}

// idMember scans the value of the sought top-level member and records it; a
// later one overrides it, as JSON.parse does.
func (s *scanner) idMember() bool {
	s.idFound, s.id, s.idUsable, s.idStart = true, "", false, s.peek()
	if s.peek() != '"' {
		return s.value(1)
	}
	id, paired, ok := s.str()
	if !ok {
		return false
	}
	s.id, s.idPaired, s.idUsable = id, paired, paired && validID(id)
	return true
}

func (s *scanner) array(depth int) bool {
	if depth > MaxDepth {
		s.tooDeep = true
		return false
	}
	s.pos++ // '['
	s.skipSpace()
	if s.peek() == ']' {
		s.pos++
		return true
	}
	for {
		if !s.value(depth) {
			return false
		}
		s.skipSpace()
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return true
		default:
			return false
		}
	}
}

// str scans a string and returns it decoded. paired is false when an escape
// left a surrogate without its partner; such a string is valid JSON but
// cannot be an id.
func (s *scanner) str() (decoded string, paired bool, ok bool) {
	s.pos++ // opening quote
	var out []byte
	paired = true
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return string(out), paired, true
		case c < 0x20:
			return "", false, false
		case c != '\\':
			end := plainEnd(s.data, s.pos)
			out = append(out, s.data[s.pos:end]...)
			s.pos = end
			continue
		}
		s.pos++ // backslash
		if s.pos >= len(s.data) {
			return "", false, false
		}
		e := s.data[s.pos]
		s.pos++
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			u, ok := s.hex4()
			if !ok {
				return "", false, false
			}
			r := rune(u)
			if utf16.IsSurrogate(r) {
				low, isPair := s.lowSurrogateAfter(r)
				if isPair {
					r = utf16.DecodeRune(r, low)
				} else {
					paired = false
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false, false
		}
	}
	return "", false, false
}

// skipStr checks a string as str does, without decoding it: most strings of
// a body are neither the sought member's name nor its value, and building
// their decoded copies was most of the scan's time.
func (s *scanner) skipStr() bool {
	s.pos++ // opening quote
	for s.pos < len(s.data) {
		s.pos = plainEnd(s.data, s.pos)
		if s.pos >= len(s.data) {
			return false
		}
		switch c := s.data[s.pos]; {
		case c == '"':
			s.pos++
			return true
		case c < 0x20:
			return false
		}
		s.pos++ // backslash
		if s.pos >= len(s.data) {
			return false
		}
		e := s.data[s.pos]
		s.pos++
		switch e {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if _, ok := s.hex4(); !ok {
				return false
			}
		default:
			return false
		}
	}
	return false
}

// lowSurrogateAfter consumes a "\uDC00".."\uDFFF" escape that completes the
// high surrogate hi, if one follows.
func (s *scanner) lowSurrogateAfter(hi rune) (rune, bool) {
	if hi >= 0xDC00 {
		return 0, false
	}
	if s.pos+6 > len(s.data) || s.data[s.pos] != '\\' || s.data[s.pos+1] != 'u' {
		return 0, false
	}
	save := s.pos
	s.pos += 2
	lo, ok := s.hex4()
	if !ok || lo < 0xDC00 || lo > 0xDFFF {
		s.pos = save
		return 0, false
	}
	return rune(lo), true
}

func (s *scanner) hex4() (uint16, bool) {
	if s.pos+4 > len(s.data) {
		return 0, false
	}
	var v uint16
	for _, c := range s.data[s.pos : s.pos+4] {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= uint16(c - '0')
		case c >= 'a' && c <= 'f':
			v |= uint16(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			v |= uint16(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	s.pos += 4
	return v, true
}

func (s *scanner) number() bool {
	if s.peek() == '-' {
		s.pos++
	}
	switch c := s.peek(); {
	case c == '0':
		s.pos++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return false
	}
	if s.peek() == '.' {
		s.pos++
		if !s.digits() {
			return false
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.pos++
		if c := s.peek(); c == '+' || c == '-' {
			s.pos++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

// digits consumes one or more decimal digits.
func (s *scanner) digits() bool {
	start := s.pos
	for c := s.peek(); c >= '0' && c <= '9'; c = s.peek() {
		s.pos++
	}
	return s.pos > start
}

func (s *scanner) literal(word string) bool {
	if len(s.data)-s.pos < len(word) || string(s.data[s.pos:s.pos+len(word)]) != word {
		return false
	}
	s.pos += len(word)
	return true
}

// plainEnd returns the end of the run of plain string bytes (neither '"',
// '\\' nor a control character) that starts at i. It tests 32 bytes per
// branch, then 8, then one: the bulk of a large body is such runs, and a
// byte at a time took 2.2 ms per MiB (0.24 now). The Code node script has no
// counterpart: it is the same rule, only faster.
func plainEnd(data []byte, i int) int {
	for ; i+32 <= len(data); i += 32 {
		w := data[i : i+32]
		if specialBytes(binary.LittleEndian.Uint64(w))|specialBytes(binary.LittleEndian.Uint64(w[8:]))|
			specialBytes(binary.LittleEndian.Uint64(w[16:]))|specialBytes(binary.LittleEndian.Uint64(w[24:])) != 0 {
			break
		}
	}
	for ; i+8 <= len(data); i += 8 {
		if specialBytes(binary.LittleEndian.Uint64(data[i:])) != 0 {
			break
		}
	}
	for ; i < len(data); i++ {
		if c := data[i]; c == '"' || c == '\\' || c < 0x20 {
			break
		}
	}
	return i
}

// specialBytes is nonzero when one of the eight bytes of x is '"', '\\' or
// below 0x20: the classic tests for a zero byte (of x XOR the byte repeated)
// and for a byte less than n, both exact as to whether one exists. Being a
// mask, it can be ORed over four words to test 32 bytes with one branch.
func specialBytes(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := x^(ones*'"'), x^(ones*'\\')
	return ((quote-ones)&^quote | (backslash-ones)&^backslash | (x-ones*0x20)&^x) & highs
}
