package sandbox

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Balancer is HAProxy in front of two keysvc replicas, as
// docs/scale-out/keysvc-haproxy.cfg balances them (docker-compose.yml's
// replicas profile runs the same file).
type Balancer struct {
	// URL is where callers reach the replicas, http://HOST:PORT.
	URL string
	cmd *exec.Cmd
}

// StartBalancer runs Debian's haproxy with cfg (the path of
// keysvc-haproxy.cfg) in front of the replicas at addresses a and b
// (HOST:PORT), its log into log, and waits until a request through it
// reaches a ready replica (/readyz answers 200). Close stops it.
func StartBalancer(cfg, a, b string, log io.Writer) (*Balancer, error) {
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		haproxy = "/usr/sbin/haproxy" // Debian's, off a non-root PATH
	}
	if _, err := os.Stat(haproxy); err != nil {
		return nil, errors.New("haproxy is not installed: apt-get install haproxy (.ci/run installs it)")
	}
	bind, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(haproxy, "-db", "-f", cfg)
	cmd.Env = append(os.Environ(), "KEYSVC_BIND="+bind, "KEYSVC_A="+a, "KEYSVC_B="+b)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start haproxy: %w", err)
	}
	lb := &Balancer{URL: "http://" + bind, cmd: cmd}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(lb.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return lb, nil
			}
		}
		if time.Now().After(deadline) {
			lb.Close()
			return nil, fmt.Errorf("HAProxy in front of %s and %s did not answer /readyz with 200 within 20 s", a, b)
		}
	}
}

// Close stops HAProxy.
func (lb *Balancer) Close() {
	_ = lb.cmd.Process.Kill()
	_ = lb.cmd.Wait()
}
