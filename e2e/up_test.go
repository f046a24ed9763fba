package e2e

import (
	"bufio"
	"io"
	"net"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// idemhook up starts a lab; a delivery to the printed webhook URL is
// processed and its replay is a duplicate; after Ctrl-C no process of the
// lab remains and its ports are free.
func TestUpLab(t *testing.T) {
	needStack(t)
	cmd := exec.Command(idemhookBinary(t), "up")
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	stderrDone := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(stderr)
		stderrDone <- string(b)
	}()

	printed := map[string]string{}
	lines := bufio.NewScanner(stdout)
	field := regexp.MustCompile(`^(n8n editor|keysvc|database|webhook):\s+(\S+)`)
	deadline := time.AfterFunc(5*time.Minute, func() { cmd.Process.Kill() })
	for lines.Scan() {
		if m := field.FindStringSubmatch(lines.Text()); m != nil {
			printed[m[1]] = m[2]
		}
		if strings.HasPrefix(lines.Text(), "Ctrl-C stops the lab") {
			break
		}
	}
	deadline.Stop()
	go io.Copy(io.Discard, stdout)
	hook := printed["webhook"]
	if hook == "" || printed["n8n editor"] == "" || printed["keysvc"] == "" || printed["database"] == "" {
		cmd.Process.Kill()
		t.Fatalf("idemhook up printed %v\n%s", printed, <-stderrDone)
	}
	wantAnswer(t, hook, `{"id":"evt_lab_1","type":"t"}`, "processed")
	wantAnswer(t, hook, `{"id":"evt_lab_1","type":"t"}`, "duplicate")

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("idemhook up after Ctrl-C: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("idemhook up did not stop within a minute of Ctrl-C")
	}
	for name, u := range printed {
		addr := u
		if p, err := url.Parse(u); err == nil && p.Host != "" {
			addr = p.Host
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("%s (%s) still accepts connections after Ctrl-C", name, addr)
		}
	}
	log := <-stderrDone
	m := regexp.MustCompile(`logs in (\S+)`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("idemhook up did not say where its logs are:\n%s", log)
	}
	base := filepath.Dir(m[1])
	if out, err := exec.Command("pgrep", "-f", base).Output(); err == nil {
		t.Errorf("processes of the lab still run after Ctrl-C: %s", out)
	}
}
