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

// readBody reads the request body: a 413 when it is over the limit, a 400
// or 415 when it does not decode.
func (s *Server) readBody(r *http.Request) ([]byte, error) {
	body, _, err := s.readBodySummed(r, true)
	return body, err
}

// readBodySummed reads the body (into one buffer sized from Content-Length
// when it is given, so it is never copied to grow) and, when its first bytes
// show it cannot be a JSON object (eventkey.CannotBeObject: its key is its
// hash), computes its SHA-256 as it arrives instead of in a second pass.
// Unless keep, such a body is not kept at all: it is hashed through a pooled
// buffer, and only its first bytes are returned, which is all that
// eventkey.DeriveForSummed needs of it.
func (s *Server) readBodySummed(r *http.Request, keep bool) ([]byte, eventkey.Summed, error) {
	src, size, err := s.decodedBody(r)
	if err != nil {
		if errors.Is(err, errUnsupportedEncoding) {
			return nil, eventkey.Summed{}, httpError(http.StatusUnsupportedMediaType, "unsupported_encoding", "%v", err)
		}
		return nil, eventkey.Summed{}, httpError(http.StatusBadRequest, "bad_encoding", "%v", err)
	}
	capacity := size
	if !keep {
		capacity = min(size, firstBytes) // until its first bytes say it is kept
	}
	body := bodyBuffer(capacity)
	var h hash.Hash
	hashed := 0
	for {
		if len(body) == cap(body) {
			body = append(body, 0)[:len(body)]
		}
		var n int
		n, err = src.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if h == nil && eventkey.CannotBeObject(body) {
			h = sha256.New()
			if !keep {
				h.Write(body)
				if err == nil {
					err = hashRest(h, src)
				}
				break
			}
		}
		if h != nil {
			h.Write(body[hashed:])
			hashed = len(body)
		} else if cap(body) < size && len(body) > 0 {
			body = slices.Grow(body, size-len(body)) // it may be an object: all of it is needed
		}
		if err != nil {
			break
		}
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge) || errors.Is(err, errDecodedTooLarge):
		return nil, eventkey.Summed{}, httpError(http.StatusRequestEntityTooLarge, "body_too_large", "the body is larger than %d bytes", s.cfg.MaxBodyBytes)
	case errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, zlib.ErrHeader) || errors.Is(err, zlib.ErrChecksum) || errors.Is(err, io.ErrUnexpectedEOF):
		return nil, eventkey.Summed{}, httpError(http.StatusBadRequest, "bad_encoding", "the body does not decode as its Content-Encoding says: %v", err)
	case err != io.EOF:
		return nil, eventkey.Summed{}, httpError(http.StatusBadRequest, "bad_body", "could not read the body: %v", err)
	}
	var sum eventkey.Summed
	if h != nil {
		h.Sum(sum.Sum[:0])
		sum.OK = true
	}
	return body, sum, nil
}

// firstBytes is what readBodySummed reads of a body it need not keep before
// it knows whether the body will be kept (an object) or only hashed.
const firstBytes = 512

// bodyBuffers recycles the buffers readBodySummed reads bodies into: zeroing
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

// recycleBody gives a body from readBodySummed back once nothing refers to
// it any more. Bodies are bounded by MaxBodyBytes, and a pool lets go of
// what it holds within two garbage collections.
func recycleBody(body []byte) { bodyBuffers.Put(&body) }

// hashChunks are the buffers a body that is only hashed streams through.
var hashChunks = sync.Pool{New: func() any { return new([64 << 10]byte) }}

// hashRest writes the rest of src to h and returns the error that ended it
// (io.EOF at the end of the body).
func hashRest(h hash.Hash, src io.Reader) error {
	buf := hashChunks.Get().(*[64 << 10]byte)
	defer hashChunks.Put(buf)
	for {
		n, err := src.Read(buf[:])
		h.Write(buf[:n])
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
