package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Names inside the stack's PostgreSQL server.
const (
	BusinessDatabase = "idemhook" // processed_events, business tables
	n8nDatabase      = "n8n"      // n8n's own tables
	pgUser           = "postgres"
	pgPassword       = "idemhook-sandbox" // a server on loopback that lives as long as the stack
)

// postgresSettings are the server settings of the stack's PostgreSQL, in
// both runtimes.
func postgresSettings(durable bool, major string) []string {
	settings := []string{"max_connections=300"}
	if major >= "14" { // a setting PostgreSQL 13 does not know (the majors are two digits)
		// A statement whose client died (n8n killed mid-execution) is
		// cancelled within a second instead of running on and committing:
		// the crash tests rely on it, and docs/inbox.md recommends it for the
		// inbox pattern.
		settings = append(settings, "client_connection_check_interval=1s")
	}
	if !durable {
		// Speed over surviving an OS crash: no fsync. synchronous_commit
		// stays on, so a commit's WAL is written before it is acknowledged
		// and a PostgreSQL crash (the fault tests' immediate restart) loses
		// no acknowledged commit; with it off, the fault tests lost some.
		settings = append(settings, "fsync=off", "full_page_writes=off")
	}
	return settings
}

// n8nStackSettings are what every n8n of the stack runs with on top of
// N8NSettings, in both runtimes: quiet, no calls home, logs in the log file.
// Connections, ports and paths are each runtime's own.
var n8nStackSettings = map[string]string{
	"N8N_VERSION_NOTIFICATIONS_ENABLED": "false",
	"N8N_TEMPLATES_ENABLED":             "false",
	"N8N_PERSONALIZATION_ENABLED":       "false",
	"N8N_LOG_LEVEL":                     "info",
	"N8N_LOG_OUTPUT":                    "console",
	// n8n pings its database every 2 s through its pool of two
	// connections, and gives the ping 5 s. Under the suite's load on two
	// cores the ping waits longer than that for a connection: n8n then
	// answers every request, webhooks included, "503 Database is not
	// ready!" until a ping passes, and after three it tears its pool down
	// under the running executions (seen: nine times in one crash test,
	// whose provider then gave up on deliveries). A stopped PostgreSQL
	// still fails the ping at once (connection refused), so the fault
	// tests see the same n8n.
	"DB_PING_TIMEOUT_MS": "30000",
}

// QueueWorkers is the number of n8n workers of a queue-mode stack.
const QueueWorkers = 2

// Stack is a running n8n and PostgreSQL pair.
type Stack struct {
	// Runtime is "local" or "docker".
	Runtime string
	// N8NURL is n8n's base URL, without a trailing slash.
	N8NURL string
	// WebhookURL is where deliveries go: N8NURL, or in queue mode the
	// webhook process's URL.
	WebhookURL string
	// Business is a pool on the business database, where the workflows'
	// tables live.
	Business *pgxpool.Pool
	// BusinessDSN connects to the business database from this process.
	BusinessDSN string
	// N8NDB is a pool on n8n's own database (executions, publication state).
	N8NDB *pgxpool.Pool
	// LogDir keeps the n8n and PostgreSQL logs after the stack stops.
	LogDir string
	// Scratch is the space on the user's server the stack runs in
	// (Options.DatabaseURL), or nil.
	Scratch *Scratch

	rt        runtime
	progress  io.Writer
	keep      bool     // the scratch space outlives the stack
	who       string   // starts the lines about the scratch space
	pgForN8N  pgTarget // how n8n reaches the business database
	closeOnce sync.Once
	closeErr  error
}

// pgTarget is a PostgreSQL database as n8n's credentials and settings name
// it.
type pgTarget struct {
	Host                     string
	Port                     int
	Database, User, Password string
	// TLS: the connection must use TLS (sslmode require or verify-*);
	// Verify: and check the server's certificate.
	TLS, Verify bool
}

// targetOf reads a PostgreSQL URL as n8n needs it.
func targetOf(dsn string) (pgTarget, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return pgTarget{}, err
	}
	t := pgTarget{Host: cfg.Host, Port: int(cfg.Port), Database: cfg.Database, User: cfg.User, Password: cfg.Password}
	if u, err := url.Parse(dsn); err == nil {
		switch u.Query().Get("sslmode") {
		case "require":
			t.TLS = true
		case "verify-ca", "verify-full":
			t.TLS, t.Verify = true, true
		}
	}
	return t, nil
}

// External is a PostgreSQL server the user runs (a CI service container, a
// local one), which a stack uses instead of starting its own: package
// scratch creates the databases in it (idemhook rules test and verify
// --database-url).
type External struct {
	// Business is the URL of the database of the workflows' tables, N8N of
	// n8n's own ("" for a stack without n8n).
	Business, N8N string
}

// runtime is what differs between the local processes and the containers.
type runtime interface {
	// n8nCLI runs `n8n args…` against the stack's n8n database.
	n8nCLI(ctx context.Context, args ...string) ([]byte, error)
	// stage makes a host file readable by the n8n CLI and returns its path
	// there.
	stage(ctx context.Context, hostPath string) (string, error)
	// nodeTypes returns n8n's catalogue of node types (types/nodes.json),
	// which n8n writes at start-up.
	nodeTypes(ctx context.Context) ([]byte, error)
	// logs returns the paths of the kept logs; folder is the folder that
	// holds them and every other file of the stack.
	logs() []string
	folder() string
	// killN8N stops n8n at once (SIGKILL: no drain, no clean-up), and
	// startN8N starts it again on the same database; startN8N returns n8n's
	// base URL, which the docker runtime may change.
	killN8N(ctx context.Context) error
	startN8N(ctx context.Context) (string, error)
	// stopPostgres stops PostgreSQL immediately (no checkpoint, as a crash
	// would); resumePostgres starts it again on the same data.
	stopPostgres(ctx context.Context) error
	resumePostgres(ctx context.Context) error
	// killWorker and startWorker stop (SIGKILL) and start queue worker i.
	killWorker(ctx context.Context, i int) error
	startWorker(ctx context.Context, i int) error
	// unexpectedExits describes each process of the stack that exited on
	// its own, with the end of its log.
	unexpectedExits() []string
	// revive starts again PostgreSQL and n8n when they exited on their own.
	revive(ctx context.Context) error
	close() error
}

// Options configure Start.
type Options struct {
	// Progress receives provisioning and start-up progress; os.Stderr when nil.
	Progress io.Writer
	// PostgresOnly starts PostgreSQL without n8n, for tests of keysvc.
	PostgresOnly bool
	// Durable keeps PostgreSQL's defaults (fsync on): benchmarks must
	// measure what users run. Tests run without fsync, for speed.
	Durable bool
	// PostgresMajor is the PostgreSQL major to run ("" for PostgresMajor;
	// see PostgresNPMVersions).
	PostgresMajor string
	// Runtime forces "local" or "docker" over IDEMHOOK_RUNTIME.
	Runtime string
	// Queue runs n8n in queue mode: Redis, a main process, QueueWorkers
	// workers and a webhook process (local runtime).
	Queue bool
	// N8NEnv adds environment variables for n8n (a workflow's test
	// endpoints); the stack's own settings win over them.
	N8NEnv map[string]string
	// External runs the stack on a PostgreSQL the user runs: none is
	// installed or started (local runtime).
	External *External
	// DatabaseURL runs the stack on the user's PostgreSQL server at that
	// URL, in a scratch space of its own (CreateScratch with Scratch's
	// options; n8n's tables in a database beside it); Close drops the
	// space, unless Keep. Who starts the lines that say where it runs and
	// what was kept ("idemhook verify").
	DatabaseURL string
	Scratch     ScratchOptions
	Keep        bool
	Who         string
	// PostgresTLS turns TLS on, with a certificate made for the run, and
	// makes every user but postgres (the stack's own) connect with it: a
	// server like the ones that refuse plain connections (local runtime).
	PostgresTLS bool
	// CommunityNode installs idemhook's community node packages
	// (n8n-nodes-idemhook and n8n-nodes-idemhook-postgres) into n8n before
	// it starts, as n8n installs a community package: CommunityNodePackage,
	// a packed .tgz, or else both packages built from this clone's source.
	CommunityNode        bool
	CommunityNodePackage string
	// CommunityNodeCustom also loads the packages from folders in
	// N8N_CUSTOM_EXTENSIONS, where n8n names each node by its CustomType
	// (local runtime).
	CommunityNodeCustom bool
	// Why says what the stack is for, in the progress lines of what it
	// installs.
	Why string
}

// Start starts a stack with the runtime IDEMHOOK_RUNTIME names, or docker
// when a Docker daemon answers, or local. It fails, never skips, when
// neither can run. With opts.DatabaseURL it first creates the scratch
// space, and fails with its *ScratchError ("nothing was created") when the
// server refuses one; a stack that fails to start drops it again.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	if opts.Progress == nil {
		opts.Progress = os.Stderr
	}
	if opts.DatabaseURL == "" {
		return start(ctx, opts)
	}
	if !opts.PostgresOnly {
		opts.Scratch.Extra = append(opts.Scratch.Extra, n8nDatabase)
	}
	space, err := CreateScratch(ctx, opts.DatabaseURL, opts.Scratch)
	if err != nil {
		return nil, fmt.Errorf("%w; nothing was created", err)
	}
	fmt.Fprintf(opts.Progress, "%s: running in %s\n", opts.Who, space.where())
	opts.External = &External{Business: space.URL, N8N: space.Extra[n8nDatabase]}
	s, err := start(ctx, opts)
	if err != nil {
		if dropErr := space.Drop(context.WithoutCancel(ctx)); dropErr != nil {
			fmt.Fprintf(opts.Progress, "%s: %v (drop %s by hand)\n", opts.Who, dropErr, space.names())
		}
		return nil, err
	}
	s.Scratch, s.progress, s.keep, s.who = space, opts.Progress, opts.Keep, opts.Who
	return s, nil
}

// start is Start on the server opts names, or on one of the stack's own.
func start(ctx context.Context, opts Options) (*Stack, error) {
	choice := os.Getenv("IDEMHOOK_RUNTIME")
	if opts.Runtime != "" {
		choice = opts.Runtime
	}
	if opts.External != nil {
		choice = "local" // n8n in a container would reach the user's server otherwise
	}
	switch choice {
	case "":
		if dockerAnswers() {
			choice = "docker"
		} else {
			choice = "local"
		}
	case "docker":
		if !dockerAnswers() {
			return nil, errors.New("IDEMHOOK_RUNTIME=docker, but no Docker daemon answers (DOCKER_HOST or /var/run/docker.sock); unset it to use the local runtime")
		}
	case "local":
	default:
		return nil, fmt.Errorf("IDEMHOOK_RUNTIME=%q: use local or docker", choice)
	}
	if opts.PostgresMajor == "" {
		opts.PostgresMajor = PostgresMajor
	}
	what := "n8n " + N8NVersion + " and PostgreSQL " + opts.PostgresMajor
	switch {
	case opts.External != nil && opts.PostgresOnly:
		what = "nothing (PostgreSQL is the one --database-url names)"
	case opts.External != nil:
		what = "n8n " + N8NVersion + " (on the PostgreSQL --database-url names)"
	case opts.PostgresOnly:
		what = "PostgreSQL " + opts.PostgresMajor
	}
	fmt.Fprintf(opts.Progress, "stack: starting %s (%s runtime)\n", what, choice)
	start := time.Now()
	var s *Stack
	var err error
	if choice == "docker" {
		s, err = startDocker(ctx, opts)
	} else {
		s, err = startLocal(ctx, opts)
	}
	if err != nil {
		return nil, err
	}
	if opts.PostgresOnly {
		fmt.Fprintf(opts.Progress, "stack: PostgreSQL ready in %s, logs in %s\n", time.Since(start).Round(time.Second), s.LogDir)
	} else {
		fmt.Fprintf(opts.Progress, "stack: stack ready in %s: n8n at %q, logs in %s\n", time.Since(start).Round(time.Second), s.N8NURL, s.LogDir)
	}
	return s, nil
}

// dockerAnswers reports whether a Docker daemon accepts connections.
func dockerAnswers() bool {
	host := os.Getenv("DOCKER_HOST")
	network, addr := "unix", "/var/run/docker.sock"
	if host != "" {
		switch {
		case strings.HasPrefix(host, "unix://"):
			addr = strings.TrimPrefix(host, "unix://")
		case strings.HasPrefix(host, "tcp://"):
			network, addr = "tcp", strings.TrimPrefix(host, "tcp://")
		default:
			return false
		}
	}
	client := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}}
	resp, err := client.Get("http://docker/_ping")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// UnexpectedExits describes each process of the stack (n8n, PostgreSQL,
// Redis, a queue worker) that exited while it was meant to run, neither
// killed by a fault the test asked for nor stopped by Close: when, its
// exit status, and the end of its log. A test that finds its stack dead
// says why with it, instead of "connection refused".
func (s *Stack) UnexpectedExits() []string { return s.rt.unexpectedExits() }

// Revive starts PostgreSQL and n8n again, on the same data and ports, when
// they exited on their own, and waits until they are ready; n8n activates
// its published workflows again as it starts.
func (s *Stack) Revive(ctx context.Context) error { return s.rt.revive(ctx) }

// Close stops everything the stack started. The logs stay in LogDir.
func (s *Stack) Close() error {
	s.closeOnce.Do(func() {
		if s.Business != nil {
			s.Business.Close()
		}
		if s.N8NDB != nil {
			s.N8NDB.Close()
		}
		s.closeErr = s.rt.close()
		s.closeScratch()
	})
	return s.closeErr
}

// closeScratch drops the scratch space, or says that it is kept; it is
// the user's server, so a failed drop is said, with what to drop by hand,
// and does not fail the run.
func (s *Stack) closeScratch() {
	switch {
	case s.Scratch == nil:
	case s.keep:
		it := "it"
		if len(s.Scratch.Extra) > 0 {
			it = "them"
		}
		fmt.Fprintf(s.progress, "%s: kept %s (--keep); drop %s when done\n", s.who, s.Scratch.kept(), it)
	default:
		if err := s.Scratch.Drop(context.Background()); err != nil {
			fmt.Fprintf(s.progress, "%s: %v (drop %s by hand)\n", s.who, err, s.Scratch.names())
		}
	}
}

// CloseAndRemove closes the stack and removes its files, the logs
// included, for a stack whose logs nobody will read (the lab stopped on
// purpose).
func (s *Stack) CloseAndRemove() error {
	err := s.Close()
	return errors.Join(err, os.RemoveAll(s.rt.folder()))
}

// CloseOnSignal closes the stack when the process is interrupted, so an
// interrupted test run leaves no server behind. Call the returned function
// to stop watching.
func (s *Stack) CloseOnSignal() (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			fmt.Fprintf(os.Stderr, "stack: %v: stopping n8n and PostgreSQL\n", sig)
			s.Close()
			os.Exit(130)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// Logs returns the paths of the kept n8n and PostgreSQL logs.
func (s *Stack) Logs() []string { return s.rt.logs() }
