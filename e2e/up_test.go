package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemhook/idemhook/internal/generator"
)

// lab is a running `idemhook up` and what it printed.
type lab struct {
	cmd     *exec.Cmd
	printed map[string]string // field → first word after it: "webhook", "database", …
	stdout  string
	stderr  chan string
}

var labField = regexp.MustCompile(`^(n8n editor|n8n API key|keysvc|database|webhook|outbox API|target):\s+(\S+)(?:\s+\(in (\S+)\))?`)

// startLab runs `idemhook up args…` and waits until it has printed the lab.
func startLab(t *testing.T, args ...string) *lab {
	t.Helper()
	l := &lab{cmd: exec.Command(idemhookBinary(t), append([]string{"up"}, args...)...), printed: map[string]string{}, stderr: make(chan string, 1)}
	stdout, _ := l.cmd.StdoutPipe()
	stderr, _ := l.cmd.StderrPipe()
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.cmd.Process.Kill() })
	go func() {
		b, _ := io.ReadAll(stderr)
		l.stderr <- string(b)
	}()
	lines := bufio.NewScanner(stdout)
	var out strings.Builder
	deadline := time.AfterFunc(5*time.Minute, func() { l.cmd.Process.Kill() })
	for lines.Scan() {
		out.WriteString(lines.Text() + "\n")
		if m := labField.FindStringSubmatch(lines.Text()); m != nil {
			l.printed[m[1]] = m[2]
			if m[3] != "" {
				l.printed[m[1]+" file"] = m[3]
			}
		}
		if m := regexp.MustCompile(`signature check: (whsec_\S+)`).FindStringSubmatch(lines.Text()); m != nil {
			l.printed["secret"] = m[1]
		}
		if strings.HasPrefix(lines.Text(), "Ctrl-C stops the lab") {
			break
		}
	}
	deadline.Stop()
	l.stdout = out.String()
	go io.Copy(io.Discard, stdout)
	for _, f := range []string{"webhook", "n8n editor", "keysvc", "database", "n8n API key file"} {
		if l.printed[f] == "" {
			l.cmd.Process.Kill()
			t.Fatalf("idemhook up printed no %s:\n%s\n%s", f, l.stdout, <-l.stderr)
		}
	}
	return l
}

// stop sends Ctrl-C and checks that nothing of the lab is left: no process,
// no open port, no file (the API key and the logs included).
func (l *lab) stop(t *testing.T) {
	t.Helper()
	keyFile := l.printed["n8n API key file"]
	if err := l.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- l.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("idemhook up after Ctrl-C: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("idemhook up did not stop within a minute of Ctrl-C")
	}
	for name, u := range l.printed {
		p, err := url.Parse(u)
		if err != nil || p.Host == "" {
			continue
		}
		if c, err := net.DialTimeout("tcp", p.Host, time.Second); err == nil {
			c.Close()
			t.Errorf("%s (%s) still accepts connections after Ctrl-C", name, p.Host)
		}
	}
	log := <-l.stderr
	m := regexp.MustCompile(`logs in (\S+)`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("idemhook up did not say where its logs are:\n%s", log)
	}
	base := filepath.Dir(m[1])
	if out, err := exec.Command("pgrep", "-f", base).Output(); err == nil {
		t.Errorf("processes of the lab still run after Ctrl-C: %s", out)
	}
	for _, left := range []string{m[1], keyFile, filepath.Dir(keyFile)} {
		if _, err := os.Stat(left); err == nil {
			t.Errorf("%s is left behind after Ctrl-C", left)
		}
	}
}

// idemhook up starts a lab; a delivery to the printed webhook URL is
// processed and its replay is a duplicate; the API key is in the printed
// file, readable by its owner only; after Ctrl-C no process, port or file
// of the lab remains.
func TestUpLab(t *testing.T) {
	needStack(t)
	l := startLab(t)
	hook := l.printed["webhook"]
	wantAnswer(t, hook, `{"id":"evt_lab_1","type":"t"}`, "processed")
	wantAnswer(t, hook, `{"id":"evt_lab_1","type":"t"}`, "duplicate")
	key, err := os.ReadFile(l.printed["n8n API key file"])
	fi, _ := os.Stat(l.printed["n8n API key file"])
	if err != nil || strings.TrimSpace(string(key)) != l.printed["n8n API key"] || fi.Mode().Perm() != 0o600 {
		t.Errorf("the API key file: %v, mode %v; want the printed key, mode 0600", err, fi.Mode().Perm())
	}
	if !strings.Contains(l.stdout, "--api-key-file "+l.printed["n8n API key file"]) {
		t.Errorf("the printed check command does not name the API key file:\n%s", l.stdout)
	}
	l.stop(t)
}

// idemhook up --pattern inbox --receiver keysvc puts keysvc's inbox in front
// of n8n, and the outbox calls the lab's own recording API: a signed
// delivery to keysvc's inbox confirms the order, the confirmation reaches
// the recording API once, and the printed check command passes.
func TestUpLabInboxThroughKeysvc(t *testing.T) {
	needStack(t)
	l := startLab(t, "--pattern", "inbox", "--receiver", "keysvc")
	hook, ops := l.printed["webhook"], l.printed["outbox API"]
	if !strings.Contains(hook, "/v1/inbox/") || ops == "" || l.printed["target"] == "" || l.printed["secret"] == "" {
		t.Fatalf("the lab does not receive through keysvc or has no outbox API:\n%s", l.stdout)
	}
	ctx := context.Background()
	db, err := pgx.Connect(ctx, l.printed["database"])
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, "INSERT INTO orders (id, amount, currency) VALUES ('lab-1', 100, 'eur')"); err != nil {
		t.Fatal(err)
	}
	body := paymentSucceeded("evt_lab_inbox_1", "pi_lab_1", "lab-1", 100)
	for range 2 {
		if r := post(t, hook, "application/json", body, stripeSigned(l.printed["secret"], body)); r.status != 200 {
			t.Fatalf("delivery to keysvc's inbox: %d %s", r.status, r.body)
		}
	}
	waitFor(t, time.Minute, "the order confirmation to reach the lab's outbox API", func() bool {
		var got struct {
			Operations []struct {
				Key   string `json:"operation_key"`
				Calls int    `json:"calls"`
			} `json:"operations"`
		}
		resp, err := http.Get(ops)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(&got)
		for _, op := range got.Operations {
			if op.Key == "order_confirmation:lab-1" {
				if op.Calls != 1 {
					t.Errorf("order_confirmation:lab-1 called %d times, want 1", op.Calls)
				}
				return true
			}
		}
		return false
	})
	var state string
	db.QueryRow(ctx, "SELECT state FROM orders WHERE id = 'lab-1'").Scan(&state)
	if state != "confirmed" {
		t.Errorf("order lab-1 is %s, want confirmed", state)
	}
	check := regexp.MustCompile(`(?m)^idemhook check (.*) \[the same options\](.*)$`).FindStringSubmatch(l.stdout)
	if check == nil {
		t.Fatalf("no check command printed:\n%s", l.stdout)
	}
	args := append(append([]string{"check"}, strings.Fields(check[1])...), "--pattern", "inbox", "--receiver", "keysvc")
	args = append(args, strings.Fields(check[2])...)
	if r := runIdemhook(t, args...); r.code != 0 {
		t.Errorf("the printed check command, %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	l.stop(t)
	if _, err := http.Get(ops); err == nil {
		t.Errorf("the outbox API %s still answers after Ctrl-C", ops)
	}
}

// idemhook up --hashing node runs the community node's workflow: n8n gets
// the package built from this clone, a delivery is processed and its replay
// is a duplicate, and the printed check command passes.
func TestUpLabCommunityNode(t *testing.T) {
	needStack(t)
	for _, store := range []string{generator.NodeStorePostgres, generator.NodeStoreKeysvc} {
		t.Run(store, func(t *testing.T) {
			// On keysvc, the lab's keysvc verifies the signature with the
			// secret it prints: an unsigned delivery is refused.
			options := []string{"--hashing", "node", "--node-store", store}
			if store == generator.NodeStoreKeysvc {
				options = append(options, "--verify", "stripe")
			}
			l := startLab(t, options...)
			hook := l.printed["webhook"]
			body := `{"id":"evt_lab_node_1","type":"t"}`
			if store == generator.NodeStoreKeysvc {
				if r := post(t, hook, "application/json", []byte(body), nil); r.status != 401 {
					t.Errorf("an unsigned delivery to the node on keysvc: %d %s, want 401", r.status, r.body)
				}
				wantSignedAnswer(t, l, hook, body, "processed")
				wantSignedAnswer(t, l, hook, body, "duplicate")
			} else {
				wantAnswer(t, hook, body, "processed")
				wantAnswer(t, hook, body, "duplicate")
			}
			check := regexp.MustCompile(`(?m)^idemhook check (.*) \[the same options\](.*)$`).FindStringSubmatch(l.stdout)
			if check == nil {
				t.Fatalf("no check command printed:\n%s", l.stdout)
			}
			args := append(append([]string{"check"}, strings.Fields(check[1])...), options...)
			if r := runIdemhook(t, args...); r.code != 0 {
				t.Errorf("the printed check command, %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
			}
			l.stop(t)
		})
	}
}

// wantSignedAnswer posts body to url signed with the lab's printed Stripe
// secret and wants a 200 with status.
func wantSignedAnswer(t *testing.T, l *lab, url, body, status string) {
	t.Helper()
	r := post(t, url, "application/json", []byte(body), stripeSigned(l.printed["secret"], []byte(body)))
	if r.status != 200 || !strings.Contains(r.body, `"status":"`+status+`"`) {
		t.Errorf("%s signed: %d %s, want 200 %s", body, r.status, r.body, status)
	}
}
