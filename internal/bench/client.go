package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
)

// leanClient is one keep-alive HTTP/1.1 connection that sends preformatted
// POSTs and reads only the status and the body length: a load generator as
// light as pgbench's client, so that it does not take the CPU the measured
// service needs (Go's net/http client took a third of it on two cores).
type leanClient struct {
	conn net.Conn
	r    *bufio.Reader
	host string
	buf  bytes.Buffer
}

func dialLean(url string) (*leanClient, error) {
	host := strings.TrimPrefix(url, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		return nil, err
	}
	return &leanClient{conn: conn, r: bufio.NewReaderSize(conn, 4096), host: host}, nil
}

// post sends body to path and returns the status code.
func (c *leanClient) post(path, contentType string, body []byte) (int, error) {
	c.buf.Reset()
	fmt.Fprintf(&c.buf, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", path, c.host, contentType, len(body))
	// One writev of the head and the body as they are: copying a 1 MiB
	// body first would spend the client's CPU on the cores it shares.
	bufs := net.Buffers{c.buf.Bytes(), body}
	if _, err := bufs.WriteTo(c.conn); err != nil {
		return 0, err
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, err
	}
	length := -1
	for {
		h, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(h) <= 2 {
			break
		}
		if name, value, ok := bytes.Cut(h, []byte(":")); ok && bytes.EqualFold(name, []byte("Content-Length")) {
			length, _ = strconv.Atoi(string(bytes.TrimSpace(value)))
		}
	}
	if length < 0 {
		return 0, errors.New("no Content-Length in the answer")
	}
	if _, err := c.r.Discard(length); err != nil {
		return 0, err
	}
	return status, nil
}

func (c *leanClient) Close() error { return c.conn.Close() }

var _ io.Closer = (*leanClient)(nil)
