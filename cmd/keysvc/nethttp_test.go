package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Requests that net/http's HTTP/1 server refuses while it parses them,
// before keysvc's handler runs, get its plain-text answer and a closed
// connection, not keysvc's JSON: a request target that does not
// percent-decode or holds a control character, a header line with a control
// character (other than a tab) in its name or value, a missing Host, a
// header block over --max-header-bytes, an unknown Transfer-Encoding and an
// HTTP version it does not speak. http.Server has no hook to change
// these answers. This pins what the README (API) and openapi.json say of
// them: when it fails, net/http changed, and so must they.
func TestNetHTTPRefusesBeforeKeysvc(t *testing.T) {
	base, _ := serveKeysvc(t, freeAddr(t, "127.0.0.1"), "--max-header-bytes", "4096")
	host := strings.TrimPrefix(base, "http://")
	const plain = "text/plain; charset=utf-8"
	for _, tc := range []struct {
		name, raw string
		status    int
		body      string
	}{
		{"a malformed percent-escape in the path", "GET /v1/reservations/%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400, "400 Bad Request"},
		{"a truncated percent-escape in the path", "GET /v1/reservations/k%2 HTTP/1.1\r\nHost: x\r\n\r\n", 400, "400 Bad Request"},
		{"a control character in the path", "GET /v1/reservations/a\x01b HTTP/1.1\r\nHost: x\r\n\r\n", 400, "400 Bad Request"},
		{"a control character in Idempotency-Key", "POST /v1/reservations HTTP/1.1\r\nHost: x\r\nIdempotency-Key: a\x01b\r\nContent-Length: 2\r\n\r\n{}", 400, "400 Bad Request"},
		{"DEL in a header value", "POST /v1/keys HTTP/1.1\r\nHost: x\r\nX-Note: a\x7fb\r\nContent-Length: 2\r\n\r\n{}", 400, "400 Bad Request"},
		{"a control character in a header name", "POST /v1/keys HTTP/1.1\r\nHost: x\r\nX-N\x01ote: a\r\nContent-Length: 2\r\n\r\n{}", 400, "400 Bad Request"},
		{"no Host", "GET /healthz HTTP/1.1\r\n\r\n", 400, "400 Bad Request: missing required Host header"},
		{"headers over --max-header-bytes", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 20<<10) + "\r\n\r\n", 431, "431 Request Header Fields Too Large"},
		{"an unknown Transfer-Encoding", "POST /v1/keys HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: compress\r\n\r\n", 501, "Unsupported transfer encoding"},
		{"an HTTP version net/http does not speak", "GET /healthz HTTP/3.0\r\nHost: x\r\n\r\n", 505, "505 HTTP Version Not Supported: unsupported protocol version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			go conn.Write([]byte(tc.raw))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != plain || string(body) != tc.body || !resp.Close {
				t.Errorf("%d %q %q (close %v), want %d %q %q and the connection closed", resp.StatusCode, resp.Header.Get("Content-Type"), body, resp.Close,
					tc.status, plain, tc.body)
			}
			if n, err := br.Read(make([]byte, 1)); err == nil {
				t.Errorf("the connection stayed open (%d more bytes)", n)
			}
		})
	}
	// A well-formed request gets keysvc's JSON: the answers above are
	// net/http's, not keysvc's.
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("GET /v1/reservations/%25zz HTTP/1.1\r\nHost: x\r\n\r\n"))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/json" || !bytes.Contains(body, []byte(`"code":"not_found"`)) {
		t.Errorf("a well-formed request: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}

// Over HTTP/2 (--tls-cert), net/http's HTTP/2 server refuses the same
// requests by resetting their stream (RST_STREAM, PROTOCOL_ERROR) without
// any answer, and keeps the connection; a well-formed request on it is
// answered. The frames are written by hand: no HTTP/2 client sends these.
func TestNetHTTP2RefusesBeforeKeysvc(t *testing.T) {
	addr, pool := serveKeysvcTLS(t)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("negotiated %q, want h2", p)
	}
	conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	writeFrame(conn, 0x4, 0, 0, nil) // SETTINGS: the defaults
	for i, tc := range []struct {
		name, path string
		header     [2]string
		reset      bool
	}{
		{"a malformed percent-escape in the path", "/v1/reservations/%zz", [2]string{"x-note", "a"}, true},
		{"a control character in Idempotency-Key", "/v1/reservations/k", [2]string{"idempotency-key", "a\x01b"}, true},
		{"a well-formed request", "/v1/reservations/%25zz", [2]string{"x-note", "a"}, false},
	} {
		stream := uint32(2*i + 1)
		// HPACK: :method GET (static 2), :scheme https (static 7), :path
		// and :authority as literals of static names 4 and 1, then one
		// literal header with a new name; no Huffman coding.
		block := []byte{0x82, 0x87}
		block = hpackString(append(block, 0x04), tc.path)
		block = hpackString(append(block, 0x01), "127.0.0.1")
		block = hpackString(hpackString(append(block, 0x00), tc.header[0]), tc.header[1])
		writeFrame(conn, 0x1, 0x5, stream, block) // HEADERS, END_STREAM|END_HEADERS
		got := awaitStream(t, conn, stream)
		if tc.reset && got != "RST_STREAM PROTOCOL_ERROR" || !tc.reset && got != "HEADERS" {
			t.Errorf("%s: stream %d got %s", tc.name, stream, got)
		}
	}
}

func hpackString(b []byte, s string) []byte {
	if len(s) >= 127 {
		panic("hpackString: only short strings")
	}
	return append(append(b, byte(len(s))), s...)
}

func writeFrame(w io.Writer, typ, flags byte, stream uint32, payload []byte) {
	var h [9]byte
	h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	h[3], h[4] = typ, flags
	binary.BigEndian.PutUint32(h[5:], stream)
	w.Write(append(h[:], payload...))
}

// awaitStream reads frames until one for stream says how it ended: its
// response HEADERS, or an RST_STREAM and its error code.
func awaitStream(t *testing.T, r io.Reader, stream uint32) string {
	t.Helper()
	for {
		var h [9]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			t.Fatalf("stream %d: %v", stream, err)
		}
		payload := make([]byte, int(h[0])<<16|int(h[1])<<8|int(h[2]))
		if _, err := io.ReadFull(r, payload); err != nil {
			t.Fatalf("stream %d: %v", stream, err)
		}
		switch id := binary.BigEndian.Uint32(h[5:]) & 0x7fffffff; {
		case h[3] == 0x7: // GOAWAY
			t.Fatalf("stream %d: the server closed the connection (GOAWAY)", stream)
		case id != stream:
		case h[3] == 0x1:
			return "HEADERS"
		case h[3] == 0x3 && binary.BigEndian.Uint32(payload) == 0x1:
			return "RST_STREAM PROTOCOL_ERROR"
		case h[3] == 0x3:
			return fmt.Sprintf("RST_STREAM code %d", binary.BigEndian.Uint32(payload))
		}
	}
}
