package stack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// localRuntime runs PostgreSQL and n8n as child processes of the test binary.
type localRuntime struct {
	installs Installs
	base     string // temporary folder: pgdata, n8n user folder, logs
	logDir   string
	n8nEnv   []string

	mu    sync.Mutex
	procs []*process // started order; stopped in reverse
}

// process is a started child whose exit is watched.
type process struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

func startLocal(ctx context.Context, opts Options) (s *Stack, err error) {
	in, err := Provision(ctx, opts.Progress)
	if err != nil {
		return nil, err
	}
	base, err := os.MkdirTemp("", "idemhook-e2e-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(base, 0o755); err != nil {
		return nil, err
	}
	rt := &localRuntime{installs: in, base: base, logDir: filepath.Join(base, "logs")}
	defer func() {
		if err != nil {
			rt.close()
			err = fmt.Errorf("%w (logs kept in %s)", err, rt.logDir)
		}
	}()
	if err := os.MkdirAll(rt.logDir, 0o777); err != nil {
		return nil, err
	}

	pgPort, err := freePort()
	if err != nil {
		return nil, err
	}
	if err := rt.startPostgres(ctx, pgPort); err != nil {
		return nil, err
	}
	adminDSN := dsn(pgPort, "postgres")
	if err := createDatabases(ctx, adminDSN, n8nDatabase, BusinessDatabase); err != nil {
		return nil, err
	}

	var n8nURL string
	if !opts.PostgresOnly {
		n8nPort, err := freePort()
		if err != nil {
			return nil, err
		}
		brokerPort, err := freePort()
		if err != nil {
			return nil, err
		}
		rt.n8nEnv = rt.n8nEnvironment(pgPort, n8nPort, brokerPort)
		n8nURL = fmt.Sprintf("http://127.0.0.1:%d", n8nPort)
		if err := rt.startN8N(ctx, n8nURL); err != nil {
			return nil, err
		}
	}

	s = &Stack{Runtime: "local", N8NURL: n8nURL, LogDir: rt.logDir, rt: rt,
		BusinessDSN: dsn(pgPort, BusinessDatabase), pgForN8N: pgEndpoint{Host: "127.0.0.1", Port: pgPort}}
	if s.Business, err = pgxpool.New(ctx, s.BusinessDSN); err != nil {
		return nil, err
	}
	if s.N8NDB, err = pgxpool.New(ctx, dsn(pgPort, n8nDatabase)); err != nil {
		s.Business.Close()
		return nil, err
	}
	return s, nil
}

func dsn(port int, database string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", pgUser, pgPassword, port, database)
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// postgresCredential returns the user PostgreSQL runs as: PostgreSQL refuses
// to run as root, so a root process runs it as "postgres" (or "nobody").
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("running as root and no unprivileged user (postgres, nobody) to run PostgreSQL as")
}

func (rt *localRuntime) startPostgres(ctx context.Context, port int) error {
	cred, err := postgresCredential()
	if err != nil {
		return err
	}
	data := filepath.Join(rt.base, "pgdata")
	sock := filepath.Join(rt.base, "pgsock")
	for _, d := range []string{data, sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
		if cred != nil {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return err
			}
		}
	}
	pwfile := filepath.Join(rt.base, "pwfile")
	if err := os.WriteFile(pwfile, []byte(pgPassword+"\n"), 0o644); err != nil {
		return err
	}
	initdb := exec.CommandContext(ctx, filepath.Join(rt.installs.PostgresBin, "initdb"),
		"-D", data, "-U", pgUser, "--pwfile="+pwfile, "-A", "scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, tail(out, 4000))
	}
	os.Remove(pwfile)

	cmd := exec.Command(filepath.Join(rt.installs.PostgresBin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", sock,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300",
		// Durability is not under test; speed is welcome.
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := rt.start("postgres", cmd); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, dsn(port, "postgres"))
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		if time.Now().After(deadline) || rt.exited("postgres") {
			return fmt.Errorf("PostgreSQL did not accept connections on port %d: %w", port, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func createDatabases(ctx context.Context, adminDSN string, names ...string) error {
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, n := range names {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{n}.Sanitize()); err != nil {
			return fmt.Errorf("create database %s: %w", n, err)
		}
	}
	return nil
}

func (rt *localRuntime) n8nEnvironment(pgPort, n8nPort, brokerPort int) []string {
	key := make([]byte, 24)
	_, _ = rand.Read(key)
	env := map[string]string{
		"PATH":                                  rt.installs.NodeBin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME":                                  rt.base,
		"N8N_USER_FOLDER":                       filepath.Join(rt.base, "n8n"),
		"N8N_ENCRYPTION_KEY":                    hex.EncodeToString(key),
		"DB_TYPE":                               "postgresdb",
		"DB_POSTGRESDB_HOST":                    "127.0.0.1",
		"DB_POSTGRESDB_PORT":                    strconv.Itoa(pgPort),
		"DB_POSTGRESDB_DATABASE":                n8nDatabase,
		"DB_POSTGRESDB_USER":                    pgUser,
		"DB_POSTGRESDB_PASSWORD":                pgPassword,
		"N8N_PORT":                              strconv.Itoa(n8nPort),
		"N8N_LISTEN_ADDRESS":                    "127.0.0.1",
		"N8N_HOST":                              "127.0.0.1",
		"WEBHOOK_URL":                           fmt.Sprintf("http://127.0.0.1:%d/", n8nPort),
		"N8N_RUNNERS_BROKER_PORT":               strconv.Itoa(brokerPort),
		"NODE_FUNCTION_ALLOW_BUILTIN":           "crypto",
		"N8N_DIAGNOSTICS_ENABLED":               "false",
		"N8N_VERSION_NOTIFICATIONS_ENABLED":     "false",
		"N8N_TEMPLATES_ENABLED":                 "false",
		"N8N_PERSONALIZATION_ENABLED":           "false",
		"N8N_ENFORCE_SETTINGS_FILE_PERMISSIONS": "false",
		"N8N_LOG_LEVEL":                         "info",
		"N8N_LOG_OUTPUT":                        "console",
	}
	out := make([]string, 0, len(env))
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		// n8n reads many N8N_* and DB_* variables; the caller's must not leak in.
		if _, ours := env[name]; ours || strings.HasPrefix(name, "N8N_") || strings.HasPrefix(name, "DB_") {
			continue
		}
		out = append(out, kv)
	}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

func (rt *localRuntime) startN8N(ctx context.Context, url string) error {
	cmd := exec.Command(rt.installs.N8N, "start")
	cmd.Env = rt.n8nEnv
	cmd.Dir = rt.base
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := rt.start("n8n", cmd); err != nil {
		return err
	}
	deadline := time.Now().Add(3 * time.Minute)
	client := http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get(url + "/healthz/readiness")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if rt.exited("n8n") {
			return fmt.Errorf("n8n exited during start-up: see %s", filepath.Join(rt.logDir, "n8n.log"))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("n8n did not become ready at %s within 3 minutes: see %s", url, filepath.Join(rt.logDir, "n8n.log"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// start runs cmd with its output in logDir/NAME.log and watches its exit.
func (rt *localRuntime) start(name string, cmd *exec.Cmd) error {
	f, err := os.OpenFile(filepath.Join(rt.logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	rt.mu.Lock()
	rt.procs = append(rt.procs, p)
	rt.mu.Unlock()
	return nil
}

func (rt *localRuntime) exited(name string) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, p := range rt.procs {
		if p.name == name {
			select {
			case <-p.exited:
				return true
			default:
			}
		}
	}
	return false
}

func (rt *localRuntime) n8nCLI(ctx context.Context, args ...string) ([]byte, error) {
	if rt.n8nEnv == nil {
		return nil, errors.New("this stack runs PostgreSQL only")
	}
	// A command that runs a workflow (n8n execute) starts a task broker of
	// its own, which must not collide with the server's.
	broker, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, rt.installs.N8N, args...)
	cmd.Env = append(append([]string{}, rt.n8nEnv...), "N8N_RUNNERS_BROKER_PORT="+strconv.Itoa(broker))
	cmd.Dir = rt.base
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd.CombinedOutput()
}

func (rt *localRuntime) stage(_ context.Context, hostPath string) (string, error) {
	return filepath.Abs(hostPath)
}

func (rt *localRuntime) nodeTypes(context.Context) ([]byte, error) {
	var found string
	_ = filepath.WalkDir(rt.base, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, filepath.Join("types", "nodes.json")) {
			found = path
			return filepath.SkipAll
		}
		return nil
	})
	if found == "" {
		return nil, fmt.Errorf("no types/nodes.json under %s", rt.base)
	}
	return os.ReadFile(found)
}

func (rt *localRuntime) logs() []string {
	return []string{filepath.Join(rt.logDir, "n8n.log"), filepath.Join(rt.logDir, "postgres.log")}
}

// close stops n8n, then PostgreSQL: SIGTERM (PostgreSQL's smart shutdown is
// SIGTERM; n8n drains), then SIGKILL after 20 s. It removes the data folders
// and keeps the logs.
func (rt *localRuntime) close() error {
	rt.mu.Lock()
	procs := rt.procs
	rt.procs = nil
	rt.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		sig := syscall.SIGTERM
		if p.name == "postgres" {
			sig = syscall.SIGINT // fast shutdown: disconnect clients at once
		}
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.exited
		}
	}
	for _, d := range []string{"pgdata", "pgsock", "n8n"} {
		os.RemoveAll(filepath.Join(rt.base, d))
	}
	return nil
}
