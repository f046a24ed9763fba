package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/sandbox"
)

// A body over --max-body gets its 413, and the answer reaches the client,
// on every route that takes a body (every POST of openapi.json, the inbox's
// and the console's served for real on PostgreSQL), 20 times of 20 for each
// kind of client:
//   - curl as it comes: it asks for 100-continue (the body is over 1 MB)
//     and reads while it sends;
//   - Python's http.client: it sends the whole body, then reads;
//   - a client that asks for 100-continue and, told to go on (or after a
//     second without an answer), sends the whole body before it reads.
//
// Before issue 41, keysvc closed the connection with the body still
// arriving: the client's kernel reset it, and the reset threw the 413 away
// (Python's http.client: ConnectionResetError every time).
func TestOversizedBodyReachesTheClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL (the inbox's and the console's routes); not run with -short")
	}
	curl, python := tool(t, "curl"), tool(t, "python3")
	ctx := context.Background()
	pg, err := sandbox.Start(ctx, sandbox.Options{PostgresOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	// The n8n inbox pattern's tables, which the console shows (--pattern-schema).
	patternSchema, err := generator.Schema(generator.Options{Pattern: generator.PatternInbox, InboxOptions: generator.InboxOptions{DBSchema: "payments"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Business.Exec(ctx, patternSchema); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	endpoints := filepath.Join(dir, "endpoints.json")
	os.WriteFile(endpoints, []byte(`{"endpoints":[{"name":"stripe","provider":"stripe","target":"http://127.0.0.1:1/webhook/x"}]}`), 0o600)
	const token = "test-token"
	_, addr, logs := startKeysvcBinaryEnv(t, []string{"DATABASE_URL=" + pg.BusinessDSN, "KEYSVC_TOKEN=" + token, "KEYSVC_SECRET_STRIPE=whsec_test"},
		"--create-schema", "--endpoints", endpoints, "--pattern-schema", "payments", "--max-body", "1048576")

	// 10 MB: ten times --max-body, as in the issue.
	body := []byte(`{"id":"evt_` + strings.Repeat("a", 10_000_000-14) + `"}`)
	bodyFile := filepath.Join(dir, "body.json")
	if err := os.WriteFile(bodyFile, body, 0o600); err != nil {
		t.Fatal(err)
	}
	const tries = 20
	const want = "413 body_too_large"
	routes := postRoutes(t)
	if len(routes) < 10 {
		t.Fatalf("openapi.json lists %d POST routes, want the 10 that take a body: %v", len(routes), routes)
	}
	for _, route := range routes {
		t.Run(route, func(t *testing.T) {
			path := strings.NewReplacer("{endpoint}", "stripe", "{key}", "evt:x", "{id}", "1").Replace(route)
			url := "http://" + addr + path
			got := map[string][]string{}
			for range tries {
				out, err := exec.Command(curl, "-sS", "-o", "-", "-w", " %{http_code}", "-H", "Authorization: Bearer "+token,
					"-H", "Content-Type: application/json", "--data-binary", "@"+bodyFile, url).CombinedOutput()
				got["curl"] = append(got["curl"], curlAnswer(out, err))
			}
			out, err := exec.Command(python, "-c", pythonClient, url, token, bodyFile, fmt.Sprint(tries)).CombinedOutput()
			if err != nil {
				t.Fatalf("python3: %v\n%s", err, out)
			}
			got["python http.client"] = strings.Split(strings.TrimSpace(string(out)), "\n")
			for range tries {
				answer, err := expectThenSend(addr, path, token, body)
				if err != nil {
					answer = err.Error()
				}
				got["100-continue, then all of it"] = append(got["100-continue, then all of it"], answer)
			}
			for _, kind := range slices.Sorted(maps.Keys(got)) {
				answers := got[kind]
				n := 0
				for _, a := range answers {
					if a == want {
						n++
					}
				}
				t.Logf("%s: %d of %d got %s", kind, n, tries, want)
				if n != tries || len(answers) != tries {
					t.Errorf("%s: %d of %d got %s; the answers: %v", kind, n, tries, want, tally(answers))
				}
			}
		})
	}
	if t.Failed() {
		t.Logf("keysvc's log:\n%s", logs.String())
	}
}

// tally counts each distinct answer.
func tally(answers []string) map[string]int {
	out := map[string]int{}
	for _, a := range answers {
		out[a]++
	}
	return out
}

// tool finds a client the test runs; .ci/run installs them.
func tool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not on PATH: this test runs it as a client (.ci/run installs it)", name)
	}
	return path
}

// postRoutes are the POST routes of openapi.json.
func postRoutes(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../../internal/keysvc/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for path, ops := range doc.Paths {
		if _, ok := ops["post"]; ok {
			out = append(out, path)
		}
	}
	slices.Sort(out)
	return out
}

// curlAnswer is "STATUS CODE" from curl's output (the JSON body, then the
// status), or what went wrong.
func curlAnswer(out []byte, err error) string {
	if err != nil {
		return fmt.Sprintf("curl: %v: %s", err, strings.TrimSpace(string(out)))
	}
	s := strings.TrimSpace(string(out))
	i := strings.LastIndexByte(s, ' ')
	if i < 0 {
		return "curl: " + s
	}
	var e struct{ Code string }
	json.Unmarshal([]byte(s[:i]), &e)
	return s[i+1:] + " " + e.Code
}

// pythonClient posts the body of file argv[3] to URL argv[1] argv[4]
// times with Python's http.client, which sends the whole body before it
// reads, a new connection each time; it prints "STATUS CODE" or the error,
// one line each.
const pythonClient = `
import http.client, json, sys, urllib.parse
url, token, path, tries = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
u = urllib.parse.urlsplit(url)
body = open(path, 'rb').read()
for _ in range(tries):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        c.request('POST', u.path, body, {'Authorization': 'Bearer ' + token, 'Content-Type': 'application/json'})
        r = c.getresponse()
        print(r.status, json.loads(r.read()).get('code'))
    except Exception as e:
        print('python:', repr(e))
    finally:
        c.close()
`

// expectThenSend posts body asking for 100-continue; told to go on, or
// without an answer within a second (as curl waits), it sends the whole
// body, and only then reads. It returns "STATUS CODE" of the final answer.
func expectThenSend(addr, path, token string, body []byte) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		path, addr, token, len(body))
	br := bufio.NewReader(conn)
	conn.SetReadDeadline(time.Now().Add(time.Second))
	resp, err := http.ReadResponse(br, nil)
	var timeout net.Error
	switch {
	case err == nil && resp.StatusCode != http.StatusContinue:
		return finalAnswer(resp) // answered before the body: it is not sent
	case err == nil || errors.As(err, &timeout) && timeout.Timeout():
	default:
		return "", fmt.Errorf("read the interim answer: %w", err)
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write(body); err != nil {
		return "", fmt.Errorf("send the body: %w", err)
	}
	if resp, err = http.ReadResponse(br, nil); err != nil {
		return "", fmt.Errorf("read the answer: %w", err)
	}
	return finalAnswer(resp)
}

func finalAnswer(resp *http.Response) (string, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("read the answer's body: %w", err)
	}
	var e struct{ Code string }
	json.Unmarshal(b, &e)
	return fmt.Sprintf("%d %s", resp.StatusCode, e.Code), nil
}
