package keysvc

import (
	"compress/gzip"
	"compress/zlib"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/idemhook/idemhook/eventkey"
)

// readBody reads the whole request body: a 413 when it is over the limit, a
// 400 or 415 when it does not decode.
func (s *Server) readBody(r *http.Request) ([]byte, error) {
	read, err := s.readBodyPlanned(r, keepWhole, nil)
	return read.kept, err
}

// bodyPlan is what keysvc keeps of a body as it reads it: no more than the
// request needs, since a body may be --max-body (16 MiB by default) and
// several arrive at once.
type bodyPlan int

const (
	// keepWhole keeps every byte: a multipart form is keyed by all of it,
	// and the inbox stores the body.
	keepWhole bodyPlan = iota
	// keepObject keeps a body that may be a JSON object (its key is its
	// id, which may be its last member) up to heldObjectBytes, and scans a
	// larger one as it arrives (eventkey.Streamed); of any other body,
	// whose key is its hash, it keeps only the first bytes, with the SHA-256
	// computed as it arrives (eventkey.Summed).
	keepObject
	// keepSmallObject keeps a JSON object of at most smallObjectBytes and
	// nothing of any other body: the request names its key, and only a
	// small object can be Slack's url_verification.
	keepSmallObject
	// keepNothing keeps nothing: the request names its key.
	keepNothing
)

// smallObjectBytes bounds the body keepSmallObject keeps. Slack's
// url_verification is about 150 bytes.
const smallObjectBytes = 64 << 10

// heldObjectBytes bounds the object keepObject holds to scan it in place
// (the old default --max-body): scanning a held body costs a third of
// streaming it, which also hashes it (5.5 and 13.6 ms for 15 MB, measured).
const heldObjectBytes = 1 << 20

// bodyRead is what readBodyPlanned kept of a body: its bytes (all, or the
// first ones), and for a body keyed without being kept, its SHA-256 (sum:
// one that cannot be an object) or its scan (streamed: an object larger
// than heldObjectBytes).
type bodyRead struct {
	kept     []byte
	sum      eventkey.Summed
	streamed *eventkey.Streamed
}

// readBodyPlanned reads the body once, keeps of it what plan says, and
// hands every byte to also as it arrives (a signature's Verifier; nil for
// none). The bytes kept go back to the pool with recycleBody.
func (s *Server) readBodyPlanned(r *http.Request, plan bodyPlan, also io.Writer) (bodyRead, error) {
	src, size, err := s.decodedBody(r)
	if err != nil {
		if errors.Is(err, errUnsupportedEncoding) {
			return bodyRead{}, httpError(http.StatusUnsupportedMediaType, "unsupported_encoding", "%v", err)
		}
		return bodyRead{}, httpError(http.StatusBadRequest, "bad_encoding", "%v", err)
	}
	if also == nil {
		also = io.Discard
	}
	var read bodyRead
	if plan == keepNothing {
		err = streamRest(src, also)
	} else {
		read, err = readKept(src, size, plan, also)
	}
	if err = s.readError(err); err != nil {
		recycleBody(read.kept)
		return bodyRead{}, err
	}
	return read, nil
}

// readKept reads src by plan (never keepNothing) into one buffer, sized
// from Content-Length when it is given so that it is never copied to grow,
// and returns what it kept and the error that ended the read (io.EOF at the
// end of the body).
func readKept(src io.Reader, size int, plan bodyPlan, also io.Writer) (bodyRead, error) {
	whole, held := size, size
	switch plan {
	case keepSmallObject:
		held = smallObjectBytes
	case keepObject:
		held = heldObjectBytes
	}
	whole = min(size, held+1)
	capacity := whole
	if plan != keepWhole {
		capacity = min(whole, firstBytes) // until its first bytes say it is kept
	}
	body := bodyBuffer(capacity)
	var err error
	for err == nil {
		if len(body) == cap(body) {
			body = append(body, 0)[:len(body)]
		}
		var n int
		n, err = src.Read(body[len(body):cap(body)])
		_, _ = also.Write(body[len(body) : len(body)+n])
		body = body[:len(body)+n]
		if plan == keepWhole {
			continue
		}
		// A body said to be larger than it may hold is not grown into.
		if eventkey.CannotBeObject(body) || len(body) > held || size > held+1 {
			return readUnkept(src, body, err, plan, also)
		}
		if cap(body) < whole && len(body) > 0 {
			body = slices.Grow(body, whole-len(body)) // it may be an object: all of it is needed
		}
	}
	return bodyRead{kept: body}, err
}

// readUnkept reads the rest of a body readKept does not keep, whose first
// bytes are read: of keepObject, they and the body's SHA-256, or, for an
// object larger than it holds, the body's scan; of keepSmallObject, nothing.
func readUnkept(src io.Reader, first []byte, err error, plan bodyPlan, also io.Writer) (bodyRead, error) {
	var read bodyRead
	var keyed io.Writer
	var h hash.Hash
	switch {
	case plan == keepSmallObject:
	case eventkey.CannotBeObject(first):
		h = sha256.New()
		keyed, read.kept = h, first
	default:
		read.streamed = eventkey.NewStreamed()
		keyed = read.streamed
	}
	if keyed != nil {
		_, _ = keyed.Write(first)
		also = io.MultiWriter(keyed, also)
	}
	if read.kept == nil {
		recycleBody(first)
	}
	if err == nil {
		err = streamRest(src, also)
	}
	if h != nil {
		h.Sum(read.sum.Sum[:0])
		read.sum.OK = true
	}
	return read, err
}

// readError is the answer to the error that ended a body's read: nil at
// its end, 413 past the limit (naming the flag that sets it), 400 for a
// body that does not decode or could not be read.
func (s *Server) readError(err error) error {
	var tooLarge *http.MaxBytesError
	switch {
	case err == io.EOF:
		return nil
	case errors.As(err, &tooLarge) || errors.Is(err, errDecodedTooLarge):
		return s.tooLarge()
	case errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, zlib.ErrHeader) || errors.Is(err, zlib.ErrChecksum) || errors.Is(err, io.ErrUnexpectedEOF):
		return httpError(http.StatusBadRequest, "bad_encoding", "the body does not decode as its Content-Encoding says: %v", err)
	}
	return httpError(http.StatusBadRequest, "bad_body", "could not read the body: %v", err)
}

// tooLarge is the 413 of a body over --max-body: it names the flag, since
// the fix is keysvc's (a provider cannot send less).
func (s *Server) tooLarge() *statusError {
	return httpError(http.StatusRequestEntityTooLarge, "body_too_large",
		"the body is larger than %d bytes, keysvc's limit: start keysvc with a larger --max-body (KEYSVC_MAX_BODY) to accept it", s.cfg.MaxBodyBytes)
}

// firstBytes is what readKept reads of a body it may not keep before it
// knows whether the body will be kept (an object) or not.
const firstBytes = 512

// bodyBuffers recycles the buffers readKept reads bodies into: zeroing
// a fresh megabyte per request, and collecting it, cost as much as scanning
// it for its id. Every handler that reads a body gives it back
// (recycleBody) when it returns; none keeps it past its request (the inbox
// stores a copy).
var bodyBuffers sync.Pool // of *[]byte

// bodyBuffer returns an empty buffer of at least capacity bytes.
func bodyBuffer(capacity int) []byte {
	if b, ok := bodyBuffers.Get().(*[]byte); ok && cap(*b) >= capacity {
		return (*b)[:0]
	}
	return make([]byte, 0, capacity)
}

// recycleBody gives a body from readBodyPlanned back once nothing refers to
// it any more. Bodies are bounded by MaxBodyBytes, and a pool lets go of
// what it holds within two garbage collections.
func recycleBody(body []byte) {
	if cap(body) > 0 {
		bodyBuffers.Put(&body)
	}
}

// streamChunks are the buffers a body that is not kept streams through.
var streamChunks = sync.Pool{New: func() any { return new([64 << 10]byte) }}

// streamRest writes the rest of src to w and returns the error that ended
// it (io.EOF at the end of the body).
func streamRest(src io.Reader, w io.Writer) error {
	buf := streamChunks.Get().(*[64 << 10]byte)
	defer streamChunks.Put(buf)
	for {
		n, err := src.Read(buf[:])
		_, _ = w.Write(buf[:n])
		if err != nil {
			return err
		}
	}
}

var (
	errUnsupportedEncoding = errors.New("unsupported Content-Encoding: send the body as is (identity), gzip or deflate")
	errDecodedTooLarge     = errors.New("the decoded body is over the limit")
)

// decodedBody returns the body as the key spec reads it, after transport
// decoding (gzip, deflate: as n8n decodes it before its nodes run), with a
// size hint. The limit applies to the decoded bytes too, so a small
// compressed body cannot unpack into gigabytes.
func (s *Server) decodedBody(r *http.Request) (io.Reader, int, error) {
	size := 512
	if r.ContentLength > 0 && r.ContentLength <= s.cfg.MaxBodyBytes {
		size = int(r.ContentLength) + 1 // +1: see the end of the body without another read
	}
	var dec io.Reader
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		return r.Body, size, nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, 0, fmt.Errorf("the body is not gzip although Content-Encoding says so: %w", err)
		}
		dec = zr
	case "deflate":
		zr, err := zlib.NewReader(r.Body)
		if err != nil {
			return nil, 0, fmt.Errorf("the body is not deflate (zlib) although Content-Encoding says so: %w", err)
		}
		dec = zr
	default:
		return nil, 0, fmt.Errorf("%w (got %.40q)", errUnsupportedEncoding, enc)
	}
	return &limitedReader{r: dec, left: s.cfg.MaxBodyBytes}, 512, nil
}

// limitedReader fails with errDecodedTooLarge past its limit.
type limitedReader struct {
	r    io.Reader
	left int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, errDecodedTooLarge
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, errDecodedTooLarge
	}
	return n, err
}

// drainLimit bounds what keysvc reads, after its answer, of a body it did
// not read to the end: one over --max-body, or one refused before it was
// read (401, 404, 429...).
const drainLimit = 64 << 20

// countedBody is a request body that knows whether it was read, and to its
// end.
type countedBody struct {
	io.ReadCloser
	read bool // a Read was made: a 100 Continue, if the client asked for one, went out
	eof  bool
}

func (b *countedBody) Read(p []byte) (int, error) {
	b.read = true
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// finishBody sends the answer, then reads and discards what is left of the
// body, up to drainLimit (and within --read-timeout). A connection closed
// with bytes still arriving is reset, and the reset can destroy the answer
// before the client reads it: a client that sends its whole body before it
// reads (Python's http.client, many webhook senders) would see a dropped
// connection instead of the 413, and retry blindly. A client that asked
// for 100-continue and was answered before anything was read sends no body:
// there is nothing to read, and net/http closes the connection. Past
// drainLimit, net/http closes it too.
func (s *Server) finishBody(w http.ResponseWriter, r *http.Request, b *countedBody) {
	if b.eof || r.ContentLength == 0 || r.ProtoMajor != 1 {
		return
	}
	if !b.read && strings.Contains(strings.ToLower(r.Header.Get("Expect")), "100-continue") {
		return
	}
	if err := http.NewResponseController(w).Flush(); err != nil {
		return
	}
	_, _ = io.CopyN(io.Discard, b, drainLimit)
}
