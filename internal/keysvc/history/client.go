package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Client calls keysvc's key API at one URL and records every call and its
// answer. One Client is one caller at a time.
type Client struct {
	base    string
	http    *http.Client
	rec     *Recorder
	timeout time.Duration
	id      int
	answers map[Answer]int64
	// unexpected receives every answer the key API does not give (a 400,
	// a 500, a key that is not the one asked): the test's mistake or
	// keysvc's, never read as an outcome.
	unexpected func(string)
}

// NewClient is a client of the key API at base (http://host:port),
// recording into rec; a call gets timeout to be answered, after which its
// outcome is unknown.
func NewClient(base string, hc *http.Client, rec *Recorder, timeout time.Duration, unexpected func(string)) *Client {
	return &Client{base: strings.TrimSuffix(base, "/"), http: hc, rec: rec, timeout: timeout, id: rec.newClient(), unexpected: unexpected, answers: map[Answer]int64{}}
}

// EventKey is the key keysvc derives from a delivery of event id (the key
// spec's evt: key).
func EventKey(id string) string { return "evt:" + id }

// Reserve delivers event id to POST /v1/reservations.
func (c *Client) Reserve(ctx context.Context, id string) Output {
	return c.do(ctx, Input{Op: Reserve, Key: EventKey(id)}, http.MethodPost, "/v1/reservations", deliveryBody(id))
}

// Acquire delivers event id to POST /v1/reservations?lease=.
func (c *Client) Acquire(ctx context.Context, id string, lease time.Duration) Output {
	in := Input{Op: Acquire, Key: EventKey(id), Lease: lease}
	return c.do(ctx, in, http.MethodPost, "/v1/reservations?lease="+lease.String(), deliveryBody(id))
}

// Complete marks event id's key done.
func (c *Client) Complete(ctx context.Context, id string) Output {
	return c.do(ctx, Input{Op: Complete, Key: EventKey(id)}, http.MethodPost, keyPath(id)+"/done", nil)
}

// Release deletes event id's key.
func (c *Client) Release(ctx context.Context, id string) Output {
	return c.do(ctx, Input{Op: Release, Key: EventKey(id)}, http.MethodDelete, keyPath(id), nil)
}

// Lookup reads event id's key.
func (c *Client) Lookup(ctx context.Context, id string) Output {
	return c.do(ctx, Input{Op: Lookup, Key: EventKey(id)}, http.MethodGet, keyPath(id), nil)
}

func deliveryBody(id string) []byte {
	b, _ := json.Marshal(map[string]string{"id": id, "type": "history.check"})
	return b
}

func keyPath(id string) string { return "/v1/reservations/" + url.PathEscape(EventKey(id)) }

// answerBody is what keysvc's reservation routes answer.
type answerBody struct {
	Key        string     `json:"key"`
	Reserved   bool       `json:"reserved"`
	State      string     `json:"state"`
	LeaseUntil *time.Time `json:"lease_until"`
	Attempt    int        `json:"attempt"`
	Code       string     `json:"code"`
}

// do sends one call, reads its answer as the model does, and records both.
func (c *Client) do(ctx context.Context, in Input, method, path string, body []byte) Output {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		panic(err) // the URL is ours
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	in.Call = now()
	resp, err := c.http.Do(req)
	var out Output
	if err == nil {
		out = c.read(in, resp)
	}
	if out.Answer != Unknown {
		out.Return = now()
	}
	c.answers[out.Answer]++
	if refused(err) {
		// Nothing was sent: no keysvc listened. The call changed nothing
		// and stays out of the history.
		c.pause(ctx)
		return out
	}
	c.rec.add(c.id, in, out)
	if out.Answer == Unknown {
		c.id = c.rec.newClient()
		c.pause(ctx)
	}
	return out
}

// refused says whether err is a connection refused: the call was never
// sent.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && errors.Is(err, syscall.ECONNREFUSED)
}

// pause waits after a call that failed, as a caller honouring keysvc's
// Retry-After would, a little less: 150 to 450 ms.
func (c *Client) pause(ctx context.Context) {
	t := time.NewTimer(150*time.Millisecond + time.Duration(rand.Int64N(int64(300*time.Millisecond))))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Answers counts the answers this client got, by kind; a call that got
// no answer is Unknown.
func (c *Client) Answers() map[Answer]int64 { return c.answers }

// read turns an HTTP answer into the model's Output: Unknown for a 5xx
// (keysvc's 503 after a store error, HAProxy's 502 or 503) or a body cut
// short.
func (c *Client) read(in Input, resp *http.Response) Output {
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return Output{}
	}
	if resp.StatusCode >= 500 {
		return Output{}
	}
	var a answerBody
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &a); err != nil {
			c.unexpected(fmt.Sprintf("%s %s: %d with a body that is not JSON: %.200s", in.Op, in.Key, resp.StatusCode, raw))
			return Output{}
		}
	}
	out, ok := answerOf(in.Op, resp.StatusCode, a)
	if !ok || (a.Key != "" && a.Key != in.Key) {
		c.unexpected(fmt.Sprintf("%s %s: %d %.200s", in.Op, in.Key, resp.StatusCode, raw))
		return Output{}
	}
	return out
}

// answerOf maps a status and body to the model's answer; ok is false for
// an answer the route never gives.
func answerOf(op Op, status int, a answerBody) (Output, bool) {
	out := Output{State: a.State, Attempt: a.Attempt}
	if a.LeaseUntil != nil {
		out.LeaseUntil = a.LeaseUntil.UnixNano()
	}
	switch {
	case op == Reserve && status == http.StatusCreated && a.Reserved:
		out.Answer, out.State = New, ""
	case op == Reserve && status == http.StatusOK && !a.Reserved:
		out.Answer = Duplicate
	case op == Acquire && status == http.StatusCreated && a.Reserved:
		out.Answer, out.State = Acquired, ""
	case op == Acquire && status == http.StatusOK && !a.Reserved:
		out.Answer, out.State = Done, ""
	case op == Acquire && status == http.StatusConflict && a.Code == "in_progress":
		out = Output{Answer: Busy}
	case (op == Complete || op == Lookup) && status == http.StatusOK:
		out.Answer = OK
	case op == Release && status == http.StatusNoContent:
		out.Answer = OK
	case op != Reserve && op != Acquire && status == http.StatusNotFound:
		out = Output{Answer: NotFound}
	default:
		return Output{}, false
	}
	return out, true
}
