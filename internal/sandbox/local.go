package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// localRuntime runs PostgreSQL and n8n as child processes of the test binary.
type localRuntime struct {
	installs Installs
	base     string // temporary folder: pgdata, n8n user folder, logs
	logDir   string
	n8nEnv   []string
	n8nURL   string
	pgPort   int
	durable  bool
	pgMajor  string
	tls      bool              // Options.PostgresTLS
	runner   *postgresUser     // the user PostgreSQL runs as (nil: this process's)
	extraEnv map[string]string // Options.N8NEnv
	// Queue mode: the webhook process's URL (n8nURL otherwise) and the
	// environment of each worker, kept to start it again.
	webhookURL string
	workerEnv  [][]string

	mu    sync.Mutex
	procs []*process // started order; stopped in reverse
	// died says, for each process that exited while it was meant to run
	// (not killed by a fault, not stopped by close), when and how.
	died []string
}

// process is a started child whose exit is watched.
type process struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

func startLocal(ctx context.Context, opts Options) (s *Stack, err error) {
	needs := Needs{N8N: !opts.PostgresOnly, Why: opts.Why,
		CommunityNode: opts.CommunityNode && !opts.PostgresOnly && opts.CommunityNodePackage == ""}
	if opts.External == nil {
		needs.Postgres = opts.PostgresMajor
	}
	in, runner, err := provisionLocal(ctx, needs, opts.Progress)
	if err != nil {
		return nil, err
	}
	rt, err := newLocalRuntime(in, runner, opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			rt.close()
			err = fmt.Errorf("%w (logs kept in %s)", err, rt.logDir)
		}
	}()
	if err := os.MkdirAll(rt.logDir, 0o777); err != nil {
		return nil, err
	}

	businessDSN, n8nDSN, err := rt.databases(ctx, opts.External)
	if err != nil {
		return nil, err
	}
	business, err := targetOf(businessDSN)
	if err != nil {
		return nil, fmt.Errorf("the business database's URL: %w", err)
	}
	if !opts.PostgresOnly {
		if err := rt.startN8NProcesses(ctx, n8nDSN, opts); err != nil {
			return nil, err
		}
	}

	s = &Stack{Runtime: "local", N8NURL: rt.n8nURL, WebhookURL: rt.webhookURL, LogDir: rt.logDir, rt: rt,
		BusinessDSN: businessDSN, pgForN8N: business}
	if s.Business, err = pgxpool.New(ctx, s.BusinessDSN); err != nil {
		return nil, err
	}
	if n8nDSN != "" {
		if s.N8NDB, err = pgxpool.New(ctx, n8nDSN); err != nil {
			s.Business.Close()
			return nil, err
		}
	}
	return s, nil
}

// provisionLocal installs what needs names. Root runs PostgreSQL as
// another user (returned; nil otherwise), who must reach its binaries in
// the cache and its data in the temporary folder: said before anything is
// installed when it cannot.
func provisionLocal(ctx context.Context, needs Needs, progress io.Writer) (Installs, *postgresUser, error) {
	var runner *postgresUser
	cache := ""
	if needs.Postgres != "" {
		var err error
		if runner, err = runAs(); err != nil {
			return Installs{}, nil, err
		}
		if cache, err = CacheDir(); err != nil {
			return Installs{}, nil, err
		}
		if err := runner.openTo(cache, cache, progress); err != nil {
			return Installs{}, nil, err
		}
	}
	in, err := Provision(ctx, needs, progress)
	if err != nil {
		return Installs{}, nil, err
	}
	if needs.Postgres != "" {
		if err := runner.openTo(filepath.Join(in.PostgresBin, "initdb"), cache, progress); err != nil {
			return Installs{}, nil, err
		}
	}
	return in, runner, nil
}

// newLocalRuntime makes the stack's temporary folder, open to runner, and
// the runtime that keeps everything of the stack in it.
func newLocalRuntime(in Installs, runner *postgresUser, opts Options) (*localRuntime, error) {
	base, err := os.MkdirTemp("", "idemhook-sandbox-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(base, 0o755); err != nil {
		return nil, err
	}
	if err := runner.openTo(base, "", opts.Progress); err != nil {
		os.RemoveAll(base)
		return nil, err
	}
	return &localRuntime{installs: in, base: base, logDir: filepath.Join(base, "logs"), durable: opts.Durable, pgMajor: opts.PostgresMajor,
		tls: opts.PostgresTLS, extraEnv: opts.N8NEnv, runner: runner}, nil
}

// databases returns the URLs of the business database and of n8n's: the
// user's (ext), or else those of a PostgreSQL it starts and creates them in.
func (rt *localRuntime) databases(ctx context.Context, ext *External) (businessDSN, n8nDSN string, err error) {
	if ext != nil {
		return ext.Business, ext.N8N, nil
	}
	pgPort, err := FreePort()
	if err != nil {
		return "", "", err
	}
	if err := rt.startPostgres(ctx, pgPort); err != nil {
		return "", "", err
	}
	if err := createDatabases(ctx, dsn(pgPort, "postgres"), n8nDatabase, BusinessDatabase); err != nil {
		return "", "", err
	}
	return dsn(pgPort, BusinessDatabase), dsn(pgPort, n8nDatabase), nil
}

// startN8NProcesses starts n8n on the database at n8nDSN, with the
// community nodes opts asks for, and in queue mode Redis before it and its
// workers and webhook process after it.
func (rt *localRuntime) startN8NProcesses(ctx context.Context, n8nDSN string, opts Options) error {
	n8nDB, err := targetOf(n8nDSN)
	if err != nil {
		return fmt.Errorf("n8n's database URL: %w", err)
	}
	n8nPort, err := FreePort()
	if err != nil {
		return err
	}
	brokerPort, err := FreePort()
	if err != nil {
		return err
	}
	if opts.CommunityNode {
		if err := rt.installCommunityNodes(ctx, rt.installs, rt.base, opts); err != nil {
			return err
		}
	}
	rt.n8nEnv = rt.n8nEnvironment(n8nDB, n8nPort, brokerPort)
	rt.n8nURL = fmt.Sprintf("http://127.0.0.1:%d", n8nPort)
	rt.webhookURL = rt.n8nURL
	if opts.Queue {
		if err := rt.startQueue(ctx, opts.Progress); err != nil {
			return err
		}
	}
	if _, err := rt.startN8N(ctx); err != nil {
		return err
	}
	if opts.Queue {
		if err := rt.startQueueProcesses(ctx); err != nil {
			return err
		}
	}
	return nil
}

func dsn(port int, database string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", pgUser, pgPassword, port, database)
}

func (rt *localRuntime) startPostgres(ctx context.Context, port int) error {
	cred := rt.runner.credential()
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
	if rt.tls {
		if err := tlsOnly(data, cred); err != nil {
			return err
		}
	}
	rt.pgPort = port
	return rt.runPostgres(ctx)
}

// runPostgres starts the server on the initialised data folder and waits
// until it accepts connections.
func (rt *localRuntime) runPostgres(ctx context.Context) error {
	cred := rt.runner.credential()
	port := rt.pgPort
	args := []string{"-D", filepath.Join(rt.base, "pgdata"), "-p", strconv.Itoa(port), "-k", filepath.Join(rt.base, "pgsock"), "-c", "listen_addresses=127.0.0.1"}
	for _, kv := range postgresSettings(rt.durable, rt.pgMajor) {
		args = append(args, "-c", kv)
	}
	if rt.tls {
		args = append(args, "-c", "ssl=on")
	}
	cmd := exec.Command(filepath.Join(rt.installs.PostgresBin, "postgres"), args...)
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
		if rt.exited("postgres") {
			return fmt.Errorf("PostgreSQL exited during start-up: %s", rt.lastExit("postgres"))
		}
		if time.Now().After(deadline) {
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

func (rt *localRuntime) n8nEnvironment(db pgTarget, n8nPort, brokerPort int) []string {
	key := make([]byte, 24)
	_, _ = rand.Read(key)
	env := maps.Clone(rt.extraEnv)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, map[string]string{
		"PATH":                                  rt.installs.NodeBin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME":                                  rt.base,
		"N8N_USER_FOLDER":                       filepath.Join(rt.base, "n8n"),
		"N8N_ENCRYPTION_KEY":                    hex.EncodeToString(key),
		"DB_TYPE":                               "postgresdb",
		"DB_POSTGRESDB_HOST":                    db.Host,
		"DB_POSTGRESDB_PORT":                    strconv.Itoa(db.Port),
		"DB_POSTGRESDB_DATABASE":                db.Database,
		"DB_POSTGRESDB_USER":                    db.User,
		"DB_POSTGRESDB_PASSWORD":                db.Password,
		"N8N_PORT":                              strconv.Itoa(n8nPort),
		"N8N_LISTEN_ADDRESS":                    "127.0.0.1",
		"N8N_HOST":                              "127.0.0.1",
		"WEBHOOK_URL":                           fmt.Sprintf("http://127.0.0.1:%d/", n8nPort),
		"N8N_RUNNERS_BROKER_PORT":               strconv.Itoa(brokerPort),
		"N8N_ENFORCE_SETTINGS_FILE_PERMISSIONS": "false",
	})
	if db.TLS {
		env["DB_POSTGRESDB_SSL_ENABLED"] = "true"
		env["DB_POSTGRESDB_SSL_REJECT_UNAUTHORIZED"] = strconv.FormatBool(db.Verify)
	}
	maps.Copy(env, n8nStackSettings)
	maps.Copy(env, N8NSettings)
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

func (rt *localRuntime) startN8N(ctx context.Context) (string, error) {
	if rt.n8nEnv == nil {
		return "", errors.New("this stack runs PostgreSQL only")
	}
	url := rt.n8nURL
	cmd := exec.Command(rt.installs.N8N, "start")
	cmd.Env = rt.n8nEnv
	cmd.Dir = rt.base
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := rt.start("n8n", cmd); err != nil {
		return "", err
	}
	deadline := time.Now().Add(3 * time.Minute)
	client := http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get(url + "/healthz/readiness")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url, nil
			}
		}
		if rt.exited("n8n") {
			return "", fmt.Errorf("n8n exited during start-up: %s", rt.lastExit("n8n"))
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("n8n did not become ready at %s within 3 minutes: see %s", url, filepath.Join(rt.logDir, "n8n.log"))
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// startQueue starts Redis (Debian's redis-server) for n8n's queue mode and
// adds the queue settings to n8n's environment.
func (rt *localRuntime) startQueue(ctx context.Context, progress io.Writer) error {
	redis, err := Redis(ctx, progress)
	if err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	cmd := exec.Command(redis, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := rt.start("redis", cmd); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis did not start on port %d", port)
		}
	}
	rt.n8nEnv = append(rt.n8nEnv, "EXECUTIONS_MODE=queue", "QUEUE_BULL_REDIS_HOST=127.0.0.1",
		"QUEUE_BULL_REDIS_PORT="+strconv.Itoa(port), "QUEUE_HEALTH_CHECK_ACTIVE=true")
	return nil
}

// startQueueProcesses starts QueueWorkers workers (n8n worker
// --concurrency=10) and one webhook process (n8n webhook), each with its
// own task broker and health port, and waits until each answers.
func (rt *localRuntime) startQueueProcesses(ctx context.Context) error {
	for i := 1; i <= QueueWorkers; i++ {
		broker, _ := FreePort()
		health, _ := FreePort()
		env := append(append([]string{}, rt.n8nEnv...), "N8N_RUNNERS_BROKER_PORT="+strconv.Itoa(broker), "QUEUE_HEALTH_CHECK_PORT="+strconv.Itoa(health))
		rt.workerEnv = append(rt.workerEnv, env)
		if err := rt.startWorker(ctx, i); err != nil {
			return err
		}
	}
	broker, _ := FreePort()
	port, _ := FreePort()
	rt.webhookURL = fmt.Sprintf("http://127.0.0.1:%d", port)
	cmd := exec.Command(rt.installs.N8N, "webhook")
	cmd.Env = append(append([]string{}, rt.n8nEnv...), "N8N_RUNNERS_BROKER_PORT="+strconv.Itoa(broker), "N8N_PORT="+strconv.Itoa(port))
	cmd.Dir = rt.base
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := rt.start("n8n-webhook", cmd); err != nil {
		return err
	}
	return rt.waitHTTP(ctx, "n8n-webhook", rt.webhookURL+"/healthz")
}

// startWorker starts queue worker i (1-based).
func (rt *localRuntime) startWorker(ctx context.Context, i int) error {
	env := rt.workerEnv[i-1]
	cmd := exec.Command(rt.installs.N8N, "worker", "--concurrency=10")
	cmd.Env = env
	cmd.Dir = rt.base
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	name := fmt.Sprintf("n8n-worker-%d", i)
	if err := rt.start(name, cmd); err != nil {
		return err
	}
	health := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "QUEUE_HEALTH_CHECK_PORT="); ok {
			health = v
		}
	}
	return rt.waitHTTP(ctx, name, "http://127.0.0.1:"+health+"/healthz")
}

// killWorker stops queue worker i with SIGKILL.
func (rt *localRuntime) killWorker(_ context.Context, i int) error {
	return rt.kill(fmt.Sprintf("n8n-worker-%d", i))
}

// waitHTTP waits until url answers 200, or the process name exits.
func (rt *localRuntime) waitHTTP(ctx context.Context, name, url string) error {
	client := http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(3 * time.Minute); ; {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if rt.exited(name) {
			return fmt.Errorf("%s exited during start-up: see %s", name, filepath.Join(rt.logDir, name+".log"))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer at %s within 3 minutes: see %s", name, url, filepath.Join(rt.logDir, name+".log"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// restartPostgres stops PostgreSQL the way `pg_ctl stop -m immediate` does
// (SIGQUIT: no checkpoint, every connection cut, crash recovery at the next
// start) and starts it again on the same data and port.
func (rt *localRuntime) stopPostgres(context.Context) error {
	p := rt.take("postgres")
	if p == nil {
		return errors.New("PostgreSQL is not running")
	}
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGQUIT)
	<-p.exited
	return nil
}

func (rt *localRuntime) resumePostgres(ctx context.Context) error { return rt.runPostgres(ctx) }

// take removes the process called name from the watched processes and
// returns it (nil when there is none).
func (rt *localRuntime) take(name string) *process {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for i, q := range rt.procs {
		if q.name == name {
			rt.procs = append(rt.procs[:i], rt.procs[i+1:]...)
			return q
		}
	}
	return nil
}

// killN8N sends SIGKILL to n8n's process group (n8n and its task runner)
// and waits for it to exit.
func (rt *localRuntime) killN8N(context.Context) error { return rt.kill("n8n") }

// kill stops the process name, and its children, with SIGKILL.
func (rt *localRuntime) kill(name string) error {
	p := rt.take(name)
	if p == nil {
		return fmt.Errorf("%s is not running", name)
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	return nil
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
		rt.noteIfUnexpected(p)
		close(p.exited)
	}()
	rt.mu.Lock()
	rt.procs = append(rt.procs, p)
	rt.mu.Unlock()
	return nil
}

// noteIfUnexpected records p's exit when p is still listed: kill and
// close take a process off the list before they signal it.
func (rt *localRuntime) noteIfUnexpected(p *process) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if !slices.Contains(rt.procs, p) {
		return
	}
	log := filepath.Join(rt.logDir, p.name+".log")
	b, _ := os.ReadFile(log)
	rt.died = append(rt.died, fmt.Sprintf("%s exited unexpectedly at %s (%v); the end of %s:\n%s",
		p.name, time.Now().Format(time.TimeOnly), p.err, log, tail(b, 1500)))
}

// lastExit is what noteIfUnexpected recorded last about name.
func (rt *localRuntime) lastExit(name string) string {
	exits := rt.unexpectedExits()
	for i := len(exits) - 1; i >= 0; i-- {
		if strings.HasPrefix(exits[i], name+" exited") {
			return exits[i]
		}
	}
	return "see " + filepath.Join(rt.logDir, name+".log")
}

// revive starts PostgreSQL and n8n again when they exited on their own.
func (rt *localRuntime) revive(ctx context.Context) error {
	if rt.exited("postgres") {
		rt.take("postgres")
		if err := rt.runPostgres(ctx); err != nil {
			return err
		}
	}
	if rt.exited("n8n") {
		rt.take("n8n")
		if _, err := rt.startN8N(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (rt *localRuntime) unexpectedExits() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return slices.Clone(rt.died)
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
	broker, err := FreePort()
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

func (rt *localRuntime) folder() string { return rt.base }

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

// installCommunityNodes installs the community node packages into n8n's
// user folder (opts.CommunityNodePackage, else the packages built from the
// clone) and, with CommunityNodeCustom, into folders n8n loads from
// N8N_CUSTOM_EXTENSIONS.
func (rt *localRuntime) installCommunityNodes(ctx context.Context, in Installs, base string, opts Options) error {
	tarballs := in.CommunityNodes
	if opts.CommunityNodePackage != "" {
		tarballs = []string{opts.CommunityNodePackage}
	}
	if err := communitynode.Install(ctx, in.NodeBin, filepath.Join(base, "n8n"), tarballs...); err != nil {
		return err
	}
	if !opts.CommunityNodeCustom {
		return nil
	}
	// One folder for every package: n8n 2.41 keeps the nodes of only the
	// last folder N8N_CUSTOM_EXTENSIONS lists (each replaces the one
	// loader it names CUSTOM), and finds every *.node.js below the one.
	folder := filepath.Join(base, "custom-extensions")
	for i, p := range communitynode.Packages {
		if i >= len(tarballs) {
			break
		}
		if _, err := communitynode.InstallCustom(ctx, p, in.NodeBin, folder, tarballs[i]); err != nil {
			return err
		}
	}
	rt.extraEnv = maps.Clone(rt.extraEnv)
	if rt.extraEnv == nil {
		rt.extraEnv = map[string]string{}
	}
	rt.extraEnv["N8N_CUSTOM_EXTENSIONS"] = folder
	return nil
}
