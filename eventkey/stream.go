package eventkey

import (
	"crypto/sha256"
	"hash"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// Streamed is a body read once, in pieces, for DeriveForStreamed: its size,
// its SHA-256 and the top-level members the key spec and the presets read
// ("id", slack's "event_id"), scanned as the id clause reads them (scan.go),
// as the bytes go by. It keeps none of the body: a name and a member's value
// of at most MaxIDBytes, and one bit per level of nesting. A service that
// keys bodies of many megabytes (keysvc) holds none of them for it.
//
// Write never fails. A multipart form is keyed by its whole form
// (ParseForm): DeriveForStreamed refuses one.
type Streamed struct {
	size int64
	sum  hash.Hash
	scan streamScanner
}

// NewStreamed returns an empty Streamed.
func NewStreamed() *Streamed {
	names := []string{"id"}
	for _, r := range presetRules {
		if r.IDMember != "" && !slices.Contains(names, r.IDMember) {
			names = append(names, r.IDMember)
		}
	}
	return &Streamed{sum: sha256.New(), scan: newStreamScanner(names)}
}

// Write adds p to the body.
func (s *Streamed) Write(p []byte) (int, error) {
	s.size += int64(len(p))
	s.sum.Write(p)
	s.scan.write(p)
	return len(p), nil
}

// Size is the number of bytes written.
func (s *Streamed) Size() int64 { return s.size }

// member is scanMember's answer for name over the body written: the
// member's value and whether it is usable.
func (s *Streamed) member(name string) (string, bool) {
	return s.scan.result(name)
}

// hashKey is the "sha256:" key of the body written.
func (s *Streamed) hashKey() string {
	var sum Summed
	s.sum.Sum(sum.Sum[:0])
	sum.OK = true
	return sum.hashKey(nil)
}

// DeriveForStreamed is DeriveFor of the body written to s, which need not
// be kept: the same key, source and errors for every body but a multipart
// form, which it refuses with ErrStreamedForm (its key needs the whole form).
func DeriveForStreamed(p Preset, header Header, s *Streamed, scope string) (Key, error) {
	if err := p.CheckScope(scope); err != nil {
		return Key{}, err
	}
	if header != nil && IsMultipart(header.Get("Content-Type")) {
		return Key{}, ErrStreamedForm
	}
	if rule, ok := presetRules[p]; ok {
		var id string
		for _, h := range rule.IDHeaders {
			if id = header.Get(h); id != "" {
				break
			}
		}
		usable := ValidHeaderID(id)
		if rule.IDMember != "" {
			id, usable = s.member(rule.IDMember)
		}
		if usable {
			if scope == "" && rule.ScopeHeader != "" {
				if sc := header.Get(rule.ScopeHeader); ValidScope(sc) {
					scope = sc
				}
			}
			return Key{Value: rule.Prefix + ":" + scope + ":" + id, Source: SourceProviderID}, nil
		}
	}
	if s.size == 0 {
		return Key{}, ErrEmptyBody
	}
	if id, ok := s.member("id"); ok {
		return Key{Value: EventIDPrefix + id, Source: SourceEventID}, nil
	}
	return Key{Value: s.hashKey(), Source: SourceBodySHA256}, nil
}

// ErrStreamedForm is DeriveForStreamed's refusal of a multipart form.
var ErrStreamedForm = streamedFormError{}

type streamedFormError struct{}

func (streamedFormError) Error() string {
	return "a multipart form is keyed by its whole form: derive its key from the body held whole (DeriveFor)"
}

// The scanner's places in the grammar.
type streamState uint8

const (
	stValue    streamState = iota // a value is next
	stObjFirst                    // after '{': a name or '}'
	stObjName                     // after ',' in an object: a name
	stObjColon                    // after a name: ':'
	stObjNext                     // after a member: ',' or '}'
	stArrFirst                    // after '[': a value or ']'
	stArrNext                     // after an element: ',' or ']'
	stString                      // inside a string
	stNumber                      // inside a number
	stLiteral                     // inside true, false or null
	stEnd                         // after the top-level value: only space
)

// The places in a number, as scanner.number reads it.
const (
	numMinus = iota // after '-'
	numZero         // a leading 0
	numInt          // digits after 1-9
	numDot          // after '.'
	numFrac         // digits after '.'
	numE            // after 'e' or 'E'
	numESign        // after the exponent's sign
	numExp          // the exponent's digits
)

// streamScanner is scanner (scan.go) over a body in pieces, for several
// members at once; its verdict on every body is scanMember's
// (TestStreamScannerAgreesWithScan).
type streamScanner struct {
	names   []string
	members []streamMember
	maxName int

	head    []byte // the first bytes, until one BOM is skipped or not
	started bool   // head was handed to the grammar
	pending []byte // an incomplete UTF-8 sequence at the end of the last piece
	badUTF8 bool

	failed  bool // not one JSON value, or nested deeper than MaxDepth
	open    []bool
	state   streamState
	object  bool // the top-level value is an object
	num     int
	literal string
	litPos  int

	// The string being read: whether it is an object's name, what of it
	// is decoded (a top-level name, a sought member's value) and how far.
	isName   bool
	capture  int // how many decoded bytes are kept; 0: none
	text     []byte
	overflow bool
	paired   bool
	escape   int // 0: none; 1: after '\'; 2-5: the \u escape's hex digits read + 1
	hex      rune
	high     rune // a high surrogate waiting for its low half
	name     []byte
	member   int // the sought member whose value is next, or -1
}

// streamMember is what scan records of one sought member: the last one
// wins, as JSON.parse reads it.
type streamMember struct {
	found, usable bool
	value         string
}

func newStreamScanner(names []string) streamScanner {
	s := streamScanner{names: names, members: make([]streamMember, len(names)), member: -1}
	for _, n := range names {
		s.maxName = max(s.maxName, len(n))
	}
	return s
}

// result is scanMember(body, name) of the body written.
func (s *streamScanner) result(name string) (string, bool) {
	s.finish()
	i := slices.Index(s.names, name)
	if i < 0 || s.failed || s.badUTF8 || s.state != stEnd || !s.object || !s.members[i].found {
		return "", false
	}
	return s.members[i].value, s.members[i].usable
}

// finish ends the body: what a piece left open is decided.
func (s *streamScanner) finish() {
	if !s.started {
		s.startGrammar()
	}
	if len(s.pending) > 0 {
		s.badUTF8 = true
	}
	if s.state == stNumber {
		if s.num == numZero || s.num == numInt || s.num == numFrac || s.num == numExp {
			s.valueDone()
		} else {
			s.failed = true
		}
	}
}

func (s *streamScanner) write(p []byte) {
	s.checkUTF8(p)
	if !s.started {
		// One leading BOM is skipped; it takes three bytes to know.
		need := len(utf8BOM) - len(s.head)
		if len(p) < need {
			s.head = append(s.head, p...)
			return
		}
		s.head = append(s.head, p[:need]...)
		p = p[need:]
		s.startGrammar()
	}
	s.feed(p)
}

// startGrammar hands the head to the grammar, without its BOM.
func (s *streamScanner) startGrammar() {
	s.started = true
	head := s.head
	s.head = nil
	if len(head) >= 3 && head[0] == utf8BOM[0] && head[1] == utf8BOM[1] && head[2] == utf8BOM[2] {
		head = head[3:]
	}
	s.feed(head)
}

// checkUTF8 keeps the body's UTF-8 verdict, a sequence cut between two
// pieces included.
func (s *streamScanner) checkUTF8(p []byte) {
	for len(s.pending) > 0 && len(p) > 0 && !s.badUTF8 {
		s.pending = append(s.pending, p[0])
		p = p[1:]
		if utf8.FullRune(s.pending) {
			s.badUTF8 = !utf8.Valid(s.pending)
			s.pending = s.pending[:0]
		}
	}
	if s.badUTF8 || len(p) == 0 {
		return
	}
	end := len(p)
	for j := len(p) - 1; j >= 0 && j >= len(p)-utf8.UTFMax+1; j-- {
		if utf8.RuneStart(p[j]) {
			if !utf8.FullRune(p[j:]) {
				end = j
			}
			break
		}
	}
	s.badUTF8 = !utf8.Valid(p[:end])
	s.pending = append(s.pending[:0], p[end:]...)
}

// feed runs the grammar over p.
func (s *streamScanner) feed(p []byte) {
	for i := 0; i < len(p) && !s.failed; {
		if s.state == stString && s.escape == 0 && s.high == 0 && p[i] != '"' && p[i] != '\\' && p[i] >= 0x20 {
			end := plainEnd(p, i)
			s.keep(p[i:end]...)
			i = end
			continue
		}
		if s.step(p[i]) {
			i++
		}
	}
}

// step reads c; false when c is to be read again (it ended a number).
func (s *streamScanner) step(c byte) bool {
	space := c == ' ' || c == '\t' || c == '\n' || c == '\r'
	switch s.state {
	case stString:
		s.stringByte(c)
	case stNumber:
		return s.numberByte(c)
	case stLiteral:
		if c != s.literal[s.litPos] {
			s.failed = true
		} else if s.litPos++; s.litPos == len(s.literal) {
			s.valueDone()
		}
	case stValue, stArrFirst:
		switch {
		case space:
		case c == ']' && s.state == stArrFirst:
			s.close()
		default:
			s.startValue(c)
		}
	case stObjFirst, stObjName:
		switch {
		case space:
		case c == '}' && s.state == stObjFirst:
			s.close()
		case c == '"':
			s.startString(true, len(s.open) == 1, s.maxName+1)
		default:
			s.failed = true
		}
	case stObjColon:
		switch {
		case space:
		case c == ':':
			s.member = -1
			if len(s.open) == 1 {
				s.member = slices.Index(s.names, string(s.name))
			}
			s.state = stValue
		default:
			s.failed = true
		}
	case stObjNext, stArrNext:
		s.afterValue(c, space)
	case stEnd:
		s.failed = !space
	}
	return true
}

// afterValue reads c after an object's member or an array's element.
func (s *streamScanner) afterValue(c byte, space bool) {
	closer := byte('}')
	if s.state == stArrNext {
		closer = ']'
	}
	switch {
	case space:
	case c == ',' && s.state == stObjNext:
		s.state = stObjName
	case c == ',':
		s.state = stValue
	case c == closer:
		s.close()
	default:
		s.failed = true
	}
}

// startValue reads the first byte of a value.
func (s *streamScanner) startValue(c byte) {
	top := len(s.open) == 0
	if top {
		s.object = c == '{'
	}
	sought := s.member
	s.member = -1
	if sought >= 0 {
		s.members[sought] = streamMember{found: true}
	}
	switch {
	case c == '{' || c == '[':
		if len(s.open) >= MaxDepth {
			s.failed = true // too deep: scan stops there too
			return
		}
		s.open = append(s.open, c == '{')
		s.state = stArrFirst
		if c == '{' {
			s.state = stObjFirst
		}
	case c == '"':
		s.member = sought
		keep := 0
		if sought >= 0 {
			keep = MaxIDBytes + 1
		}
		s.startString(false, false, keep)
	case c == '-' || (c >= '0' && c <= '9'):
		s.state, s.num = stNumber, numInt
		switch c {
		case '-':
			s.num = numMinus
		case '0':
			s.num = numZero
		}
	case c == 't':
		s.state, s.litPos, s.literal = stLiteral, 1, "true"
	case c == 'f':
		s.state, s.litPos, s.literal = stLiteral, 1, "false"
	case c == 'n':
		s.state, s.litPos, s.literal = stLiteral, 1, "null"
	default:
		s.failed = true
	}
}

// numberByte reads c inside a number; false when c ended it.
func (s *streamScanner) numberByte(c byte) bool {
	digit := c >= '0' && c <= '9'
	next := -1
	switch s.num {
	case numMinus:
		switch {
		case c == '0':
			next = numZero
		case digit:
			next = numInt
		}
	case numZero, numInt, numFrac:
		switch {
		case digit && s.num != numZero:
			next = s.num
		case c == '.' && s.num != numFrac:
			next = numDot
		case c == 'e' || c == 'E':
			next = numE
		default:
			s.valueDone()
			return false
		}
	case numDot:
		if digit {
			next = numFrac
		}
	case numE:
		switch {
		case c == '+' || c == '-':
			next = numESign
		case digit:
			next = numExp
		}
	case numESign, numExp:
		if digit {
			next = numExp
		} else if s.num == numExp {
			s.valueDone()
			return false
		}
	}
	if next < 0 {
		s.failed = true
	}
	s.num = next
	return true
}

// startString begins a string: an object's name or a value, keeping up to
// keep decoded bytes of it.
func (s *streamScanner) startString(isName, decode bool, keep int) {
	s.state, s.isName, s.paired, s.escape, s.high, s.overflow = stString, isName, true, 0, 0, false
	s.capture, s.text = 0, s.text[:0]
	if isName && decode || !isName {
		s.capture = keep
	}
}

// keep appends decoded bytes of the string, up to its capture.
func (s *streamScanner) keep(b ...byte) {
	if s.capture == 0 || s.overflow {
		return
	}
	if len(s.text)+len(b) > s.capture {
		s.overflow = true
		return
	}
	s.text = append(s.text, b...)
}

// keepRune appends r, first giving a waiting high surrogate up as U+FFFD.
func (s *streamScanner) keepRune(r rune) {
	s.flushHigh()
	s.keep(utf8.AppendRune(nil, r)...)
}

// flushHigh gives up a high surrogate whose low half did not follow.
func (s *streamScanner) flushHigh() {
	if s.high != 0 {
		s.high, s.paired = 0, false
		s.keep(utf8.AppendRune(nil, utf8.RuneError)...)
	}
}

// stringByte reads c inside a string, as scanner.str does.
func (s *streamScanner) stringByte(c byte) {
	switch {
	case s.escape >= 2:
		v, ok := hexValue(c)
		if !ok {
			s.failed = true
			return
		}
		s.hex = s.hex<<4 | v
		if s.escape++; s.escape == 6 {
			s.escape = 0
			s.unicodeEscape(s.hex)
		}
	case s.escape == 1:
		if c == 'u' {
			s.escape, s.hex = 2, 0
			return
		}
		s.escape = 0
		decoded, ok := shortEscape(c)
		if !ok {
			s.failed = true
			return
		}
		s.flushHigh()
		s.keep(decoded)
	case c == '\\':
		s.escape = 1
	case c == '"':
		s.flushHigh()
		s.endString()
	case c < 0x20:
		s.failed = true
	default:
		s.flushHigh()
		s.keep(c)
	}
}

// unicodeEscape takes the value of a \u escape: a low half completes a
// waiting high surrogate; any other surrogate is given up as U+FFFD.
func (s *streamScanner) unicodeEscape(v rune) {
	if s.high != 0 && v >= 0xDC00 && v <= 0xDFFF {
		r := utf16.DecodeRune(s.high, v)
		s.high = 0
		s.keep(utf8.AppendRune(nil, r)...)
		return
	}
	s.flushHigh()
	switch {
	case v >= 0xD800 && v < 0xDC00:
		s.high = v
	case utf16.IsSurrogate(v):
		s.paired = false
		s.keep(utf8.AppendRune(nil, utf8.RuneError)...)
	default:
		s.keep(utf8.AppendRune(nil, v)...)
	}
}

// endString ends the string: a name goes on to its ':', a sought member's
// value is recorded.
func (s *streamScanner) endString() {
	if s.isName {
		s.name = append(s.name[:0], s.text...)
		if s.overflow {
			s.name = append(s.name[:0], 0) // longer than any sought name
		}
		s.state = stObjColon
		return
	}
	if s.member >= 0 {
		m := &s.members[s.member]
		m.value = string(s.text)
		m.usable = !s.overflow && s.paired && validID(m.value)
		if !m.usable {
			m.value = ""
		}
		s.member = -1
	}
	s.valueDone()
}

// close ends the innermost object or array.
func (s *streamScanner) close() {
	s.open = s.open[:len(s.open)-1]
	s.valueDone()
}

// valueDone moves past a complete value, to what its container expects.
func (s *streamScanner) valueDone() {
	switch {
	case len(s.open) == 0:
		s.state = stEnd
	case s.open[len(s.open)-1]:
		s.state = stObjNext
	default:
		s.state = stArrNext
	}
}

// shortEscape is what the escape \c stands for.
func shortEscape(c byte) (byte, bool) {
	switch c {
	case '"', '\\', '/':
		return c, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}

func hexValue(c byte) (rune, bool) {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0'), true
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}
