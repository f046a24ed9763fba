package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/idemhook/idemhook/internal/sandbox"
)

// keysvcProcess is the keysvc binary run as a user runs it, on one address
// it keeps across a SIGKILL and a restart.
type keysvcProcess struct {
	t    *testing.T
	name string
	addr string
	args []string
	env  []string
	log  *os.File

	mu     sync.Mutex
	proc   *os.Process
	exited chan struct{} // closed when proc ended
}

func newKeysvcProcess(t *testing.T, name, logDir string, env []string, args ...string) *keysvcProcess {
	t.Helper()
	addr, err := sandbox.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(logDir, "keysvc-"+name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	p := &keysvcProcess{t: t, name: name, addr: addr, args: args, env: env, log: log}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		_ = p.proc.Signal(syscall.SIGTERM)
		<-p.exited
		log.Close()
	})
	return p
}

func (p *keysvcProcess) url() string { return "http://" + p.addr }

// start runs keysvc and waits until it serves (/healthz: its store may be
// cut off by a fault). A keysvc that cannot start (PostgreSQL down, or the
// link to it) is started again until it does, for a minute at most.
func (p *keysvcProcess) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	bin := keysvcBinary(p.t)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		cmd := exec.Command(bin, append([]string{"--addr", p.addr}, p.args...)...)
		cmd.Env = append(os.Environ(), p.env...)
		cmd.Stdout, cmd.Stderr = p.log, p.log
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return err
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		if serving(p.url(), exited) {
			p.proc, p.exited = cmd.Process, exited
			return nil
		}
	}
	return fmt.Errorf("keysvc %s did not start within a minute (log: %s)", p.name, p.log.Name())
}

// serving waits until keysvc at url answers /healthz, or its process
// exits.
func serving(url string, exited <-chan struct{}) bool {
	for {
		select {
		case <-exited:
			return false
		case <-time.After(50 * time.Millisecond):
		}
		if resp, err := http.Get(url + "/healthz"); err == nil {
			resp.Body.Close()
			return true
		}
	}
}

// kill sends SIGKILL and waits for the process to end.
func (p *keysvcProcess) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.proc.Kill()
	<-p.exited
}

// pgLink is Toxiproxy, in this process, between keysvc and PostgreSQL:
// every keysvc on PostgreSQL connects through it, so that the link can be
// slowed, reset, black-holed and cut.
type pgLink struct {
	proxy *toxiproxy.Proxy
	dsn   string // DATABASE_URL through the link
}

func newPGLink(t *testing.T, pgDSN string) *pgLink {
	t.Helper()
	u, err := url.Parse(pgDSN)
	if err != nil {
		t.Fatal(err)
	}
	listen, err := sandbox.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	proxy := toxiproxy.NewProxy(server, "postgres", listen, u.Host)
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Stop)
	u.Host = listen
	return &pgLink{proxy: proxy, dsn: u.String()}
}

// toxic adds a toxic for d, then removes it; removing a timeout closes the
// connections it held.
func (l *pgLink) toxic(ctx context.Context, spec string, d time.Duration) error {
	w, err := l.proxy.Toxics.AddToxicJson(strings.NewReader(spec))
	if err != nil {
		return fmt.Errorf("toxic %s: %w", spec, err)
	}
	sleepCtx(ctx, d)
	return l.proxy.Toxics.RemoveToxic(context.Background(), w.Name)
}

// down cuts the link for d: connections are closed, new ones refused.
func (l *pgLink) down(ctx context.Context, d time.Duration) error {
	l.proxy.Stop()
	sleepCtx(ctx, d)
	return l.proxy.Start()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
