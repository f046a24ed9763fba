// Command keysvc serves idemhook's key derivation and reservation over HTTP
// for low-code tools (n8n's HTTP Request node, Make, Zapier, Power Automate).
//
//	keysvc                                   embedded store in ./keysvc.db
//	DATABASE_URL=postgres://… keysvc         PostgreSQL, shared with n8n workflows
//
// Every flag has an environment variable; `keysvc --help` lists them.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemhook/idemhook/internal/buildinfo"
	"github.com/idemhook/idemhook/internal/duration"
	"github.com/idemhook/idemhook/keysvc"
	"github.com/idemhook/idemhook/keysvc/console"
	"github.com/idemhook/idemhook/keysvc/inbox"
	"github.com/idemhook/idemhook/signature"
)

type config struct {
	addr         string
	databaseURL  string
	dbFile       string
	table        string
	createSchema bool
	maxBody      int64
	readTimeout  time.Duration
	writeTimeout time.Duration
	retention    time.Duration
	logLevel     string
	logSample    int
	token        string
	secrets      map[signature.Provider][]string
	tolerance    time.Duration

	endpoints []inbox.Endpoint
	inboxOpts inbox.Options
	// patternSchema shows the n8n inbox pattern's tables in the console;
	// consoleBodies lets admin tokens read the inbox's bodies there.
	patternSchema string
	consoleBodies bool

	tokensFile        string
	tokens            *keysvc.Tokens // from tokensFile
	insecureNoAuth    bool
	signatureAuth     bool
	protectMetrics    bool
	rateLimit         keysvc.RateLimit
	maxConnsPerClient int
	readHeaderTimeout time.Duration
	maxHeaderBytes    int
	tlsCert, tlsKey   string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run serves until ctx ends (SIGINT or SIGTERM in main).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := parseConfig(args, stdout, stderr)
	if !ok {
		return code
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.logLevel)); err != nil {
		fmt.Fprintf(stderr, "keysvc: --log-level %q: use debug, info, warn or error\n", cfg.logLevel)
		return 2
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	store, kind, err := openStore(ctx, cfg)
	if err != nil {
		return cannotStart(stderr, err)
	}
	defer store.Close()
	var in *inbox.Inbox
	if len(cfg.endpoints) > 0 {
		cfg.inboxOpts.Logger = logger
		in, err = inbox.Open(ctx, store.(*keysvc.PGStore).Pool(), cfg.endpoints, cfg.inboxOpts)
		if err != nil {
			return cannotStart(stderr, fmt.Errorf("open the inbox: %w", err))
		}
		if err := in.Start(ctx); err != nil {
			return cannotStart(stderr, fmt.Errorf("start the inbox: %w", err))
		}
		logger.Info("inbox started", "worker", in.WorkerID())
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = in.Close(stopCtx)
		}()
	}

	var pattern *console.Pattern
	if cfg.patternSchema != "" {
		if pattern, err = console.OpenPattern(ctx, store.(*keysvc.PGStore).Pool(), cfg.patternSchema, logger); err != nil {
			return cannotStart(stderr, fmt.Errorf("--pattern-schema: %w", err))
		}
	}

	handler := keysvc.New(keysvc.Config{Store: store, MaxBodyBytes: cfg.maxBody, Token: cfg.token, Tokens: cfg.tokens, Logger: logger,
		Secrets: cfg.secrets, SignatureTolerance: cfg.tolerance, Inbox: in, Pattern: pattern, HideBodies: !cfg.consoleBodies, LogSample: cfg.logSample,
		SignatureAuth: cfg.signatureAuth, ProtectMetrics: cfg.protectMetrics, RateLimit: cfg.rateLimit})
	srv := &http.Server{
		Addr:              cfg.addr,
		Handler:           handler,
		ReadHeaderTimeout: cfg.readHeaderTimeout,
		ReadTimeout:       cfg.readTimeout,
		WriteTimeout:      cfg.writeTimeout,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    cfg.maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return cannotStart(stderr, fmt.Errorf("--addr: %w", err))
	}
	ln = handler.LimitConnections(ln, cfg.maxConnsPerClient)
	if cfg.tokensFile != "" {
		go reloadTokensOnHUP(ctx, cfg, handler, logger)
	}
	if cfg.insecureNoAuth {
		go warnInsecure(ctx, logger)
	}
	if cfg.retention > 0 {
		go cleanupLoop(ctx, store, cfg.retention, logger)
	}
	var providers []string
	for p := range cfg.secrets {
		providers = append(providers, string(p))
	}
	sort.Strings(providers)
	var endpoints []string
	for _, e := range cfg.endpoints {
		endpoints = append(endpoints, e.Name)
	}
	logger.Info("keysvc listening", "addr", ln.Addr().String(), "store", kind, "tokens", cfg.tokens.Len()+boolInt(cfg.token != ""),
		"tls", cfg.tlsCert != "", "max_body_bytes", cfg.maxBody, "rate_limit", cfg.rateLimit.Rate, "signature_providers", providers,
		"inbox_endpoints", endpoints)
	errc := make(chan error, 1)
	go func() {
		if cfg.tlsCert != "" {
			errc <- srv.ServeTLS(ln, cfg.tlsCert, cfg.tlsKey) // HTTP/2 on, as net/http offers it over TLS
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case err := <-errc:
		logger.Error("server stopped", "error", err)
		return 1
	case <-ctx.Done():
	}
	logger.Info("shutting down: finishing in-flight requests")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		logger.Error("shutdown", "error", err)
		return 1
	}
	logger.Info("stopped")
	return 0
}

// cannotStart says why keysvc stops before it serves, in the form of every
// start-up error (a flag's, a variable's, the store's, the address's): one
// plain line on stderr, "keysvc: CAUSE"; the JSON log lines begin once it
// serves. It exits 1 (the work failed; parseConfig exits 2 for a command
// line or an environment that is wrong).
func cannotStart(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "keysvc: %s\n", strings.Join(strings.Fields(err.Error()), " ")) // a driver's error can hold line breaks
	return 1
}

func openStore(ctx context.Context, cfg config) (keysvc.Store, string, error) {
	if cfg.databaseURL != "" {
		s, err := keysvc.OpenPG(ctx, cfg.databaseURL, keysvc.PGOptions{Table: cfg.table, CreateSchema: cfg.createSchema})
		return s, "postgres", err
	}
	s, err := keysvc.OpenBolt(cfg.dbFile)
	if err != nil {
		err = fmt.Errorf("--db-file: %w", err)
	}
	return s, "embedded:" + cfg.dbFile, err
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// reloadTokensOnHUP re-reads the tokens file on SIGHUP: a removed token is
// refused from the next request on, without a restart. A file that does not
// parse leaves the tokens as they were.
func reloadTokensOnHUP(ctx context.Context, cfg config, s *keysvc.Server, logger *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		tokens, err := readTokens(cfg.tokensFile)
		if err != nil {
			logger.Error("tokens file not reloaded; the previous tokens stay", "error", err)
			continue
		}
		if cfg.token != "" {
			tokens = keysvc.FullToken(cfg.token).Merge(tokens)
		}
		s.SetTokens(tokens)
		logger.Info("tokens reloaded", "tokens", tokens.Len())
	}
}

func readTokens(path string) (*keysvc.Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	defer f.Close()
	return keysvc.ParseTokens(f)
}

// warnInsecure says at start and every hour that anyone who reaches keysvc
// may release keys.
func warnInsecure(ctx context.Context, logger *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		logger.Warn("keysvc serves every route to anyone who reaches it (--insecure-no-auth): anyone can release a processed event's key or reserve a real event id first")
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// isDir reports whether path is a folder.
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// loopback reports whether addr listens on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// cleanupLoop deletes reservations older than retention, hourly.
func cleanupLoop(ctx context.Context, store keysvc.Store, retention time.Duration, logger *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		n, err := store.Cleanup(ctx, time.Now().Add(-retention))
		if err != nil && !errors.Is(err, context.Canceled) {
			logger.Warn("cleanup failed", "error", err)
		} else if n > 0 {
			logger.Info("cleanup", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// env returns the value of name, or def.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func parseConfig(args []string, stdout, stderr io.Writer) (config, int, bool) {
	fs := flag.NewFlagSet("keysvc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.StringVar(&cfg.addr, "addr", env("KEYSVC_ADDR", "127.0.0.1:8080"), "listen `address` (KEYSVC_ADDR)")
	fs.StringVar(&cfg.databaseURL, "database-url", env("DATABASE_URL", ""), "PostgreSQL `URL`; empty uses the embedded store (DATABASE_URL)")
	fs.StringVar(&cfg.dbFile, "db-file", env("KEYSVC_DB_FILE", "keysvc.db"), "embedded store `file` (KEYSVC_DB_FILE)")
	fs.StringVar(&cfg.table, "table", env("KEYSVC_TABLE", "processed_events"), "PostgreSQL `table` of reservations, shared with the n8n workflows (KEYSVC_TABLE)")
	createDefault, err := strconv.ParseBool(env("KEYSVC_CREATE_SCHEMA", "false"))
	if err != nil {
		fmt.Fprintf(stderr, "keysvc: KEYSVC_CREATE_SCHEMA=%q: use true or false\n", os.Getenv("KEYSVC_CREATE_SCHEMA"))
		return config{}, 2, false
	}
	fs.BoolVar(&cfg.createSchema, "create-schema", createDefault, "create the PostgreSQL tables (reservations with lease columns; the inbox's and River's with --endpoints) if missing (KEYSVC_CREATE_SCHEMA)")
	maxBody, err := strconv.ParseInt(env("KEYSVC_MAX_BODY", strconv.Itoa(keysvc.DefaultMaxBodyBytes)), 10, 64)
	if err != nil {
		fmt.Fprintln(stderr, "keysvc: KEYSVC_MAX_BODY must be a number of bytes")
		return config{}, 2, false
	}
	fs.Int64Var(&cfg.maxBody, "max-body", maxBody, "largest accepted body in `bytes`; larger gets 413 (KEYSVC_MAX_BODY)")
	durations := []struct {
		p          *time.Duration
		name, env  string
		def, usage string
	}{
		{&cfg.readTimeout, "read-timeout", "KEYSVC_READ_TIMEOUT", "10s", "time to read a request"},
		{&cfg.writeTimeout, "write-timeout", "KEYSVC_WRITE_TIMEOUT", "10s", "time to write a response"},
		{&cfg.retention, "retention", "KEYSVC_RETENTION", "30d", "delete reservations older than this, hourly; 0 disables"},
		{&cfg.tolerance, "signature-tolerance", "KEYSVC_SIGNATURE_TOLERANCE", "5m", "how far a signed timestamp may be from now, both ways"},
		{&cfg.inboxOpts.DeliveryTimeout, "inbox-delivery-timeout", "KEYSVC_INBOX_DELIVERY_TIMEOUT", "30s", "inbox: how long one delivery to a target may take"},
		{&cfg.inboxOpts.Backoff, "inbox-backoff", "KEYSVC_INBOX_BACKOFF", "1s", "inbox: first redelivery delay, doubled per attempt with jitter"},
		{&cfg.inboxOpts.MaxBackoff, "inbox-max-backoff", "KEYSVC_INBOX_MAX_BACKOFF", "5m", "inbox: longest redelivery delay"},
		{&cfg.inboxOpts.RecoverAfter, "inbox-recover-after", "KEYSVC_INBOX_RECOVER_AFTER", "2m", "inbox: re-enqueue an entry still undelivered after this long"},
		{&cfg.inboxOpts.RescueAfter, "inbox-rescue-after", "KEYSVC_INBOX_RESCUE_AFTER", "15s", "inbox: this keysvc's lease; a delivery in flight in a keysvc that stopped renewing its lease this long ago is sent again by another (at least 5s)"},
	}
	for _, d := range durations {
		v, err := duration.Parse(env(d.env, d.def))
		if err != nil {
			fmt.Fprintf(stderr, "keysvc: %s=%q: %v\n", d.env, os.Getenv(d.env), err)
			return config{}, 2, false
		}
		duration.Var(fs, d.p, d.name, v, d.usage+", a `DURATION` ("+d.env+")")
	}
	fs.StringVar(&cfg.logLevel, "log-level", env("KEYSVC_LOG_LEVEL", "info"), "debug, info, warn or error (KEYSVC_LOG_LEVEL); warn keeps errors and drops the request lines")
	sample, err := strconv.Atoi(env("KEYSVC_LOG_SAMPLE", "1"))
	if err != nil || sample < 1 {
		fmt.Fprintf(stderr, "keysvc: KEYSVC_LOG_SAMPLE=%q: give a whole number of at least 1\n", os.Getenv("KEYSVC_LOG_SAMPLE"))
		return config{}, 2, false
	}
	fs.IntVar(&cfg.logSample, "log-sample", sample, "log one request line in `N`; 5xx answers and errors are always logged (KEYSVC_LOG_SAMPLE)")
	endpointsFile := fs.String("endpoints", env("KEYSVC_ENDPOINTS", ""), "inbox: JSON `file` of the endpoints served at /v1/inbox/{name} (KEYSVC_ENDPOINTS); needs DATABASE_URL")
	fs.StringVar(&cfg.inboxOpts.Schema, "inbox-schema", env("KEYSVC_INBOX_SCHEMA", ""), "inbox: PostgreSQL `schema` of inbox_events and River's tables; the n8n inbox pattern's --db-schema (KEYSVC_INBOX_SCHEMA)")
	fs.StringVar(&cfg.patternSchema, "pattern-schema", env("KEYSVC_PATTERN_SCHEMA", ""), "console: PostgreSQL `schema` of the n8n inbox pattern (its --db-schema) whose events and outbox tasks the console shows and retries; needs DATABASE_URL (KEYSVC_PATTERN_SCHEMA)")
	bodiesDefault, err := strconv.ParseBool(env("KEYSVC_CONSOLE_BODIES", "true"))
	if err != nil {
		fmt.Fprintf(stderr, "keysvc: KEYSVC_CONSOLE_BODIES=%q: use true or false\n", os.Getenv("KEYSVC_CONSOLE_BODIES"))
		return config{}, 2, false
	}
	fs.BoolVar(&cfg.consoleBodies, "console-bodies", bodiesDefault, "console: let admin tokens read the inbox's bodies (they may hold personal data); false hides them from everyone (KEYSVC_CONSOLE_BODIES)")
	fs.StringVar(&cfg.tokensFile, "tokens-file", env("KEYSVC_TOKENS_FILE", ""), "`file` of scoped tokens (reserve, read or admin), one \"name scope sha256 [key-prefix]\" a line; re-read on SIGHUP (KEYSVC_TOKENS_FILE)")
	fs.BoolVar(&cfg.insecureNoAuth, "insecure-no-auth", false, "serve a non-loopback address without any token (warned at start and hourly)")
	fs.BoolVar(&cfg.signatureAuth, "signature-auth", false, "accept /v1/keys and /v1/reservations without a token when ?provider= names a provider whose signature verifies")
	fs.BoolVar(&cfg.protectMetrics, "protect-metrics", false, "put /metrics behind the admin scope")
	fs.Float64Var(&cfg.rateLimit.Rate, "rate-limit", -1, "requests per second per client, 0 for none (default: 100 on a non-loopback address, none on loopback)")
	fs.IntVar(&cfg.rateLimit.Burst, "rate-burst", 0, "burst of the rate limit (default: twice the rate)")
	fs.BoolVar(&cfg.rateLimit.TrustProxy, "trust-proxy", false, "take the client from X-Forwarded-For (behind a reverse proxy)")
	fs.IntVar(&cfg.maxConnsPerClient, "max-conns-per-client", 256, "open connections per client address")
	duration.Var(fs, &cfg.readHeaderTimeout, "read-header-timeout", 5*time.Second, "time to read a request's headers (slow clients are cut), a `DURATION`")
	fs.IntVar(&cfg.maxHeaderBytes, "max-header-bytes", 64<<10, "largest request header block in `bytes`")
	fs.StringVar(&cfg.tlsCert, "tls-cert", env("KEYSVC_TLS_CERT", ""), "certificate `file` to serve HTTPS (and HTTP/2) directly (KEYSVC_TLS_CERT)")
	fs.StringVar(&cfg.tlsKey, "tls-key", env("KEYSVC_TLS_KEY", ""), "private key `file` of --tls-cert (KEYSVC_TLS_KEY)")
	tokenFile := fs.String("token-file", env("KEYSVC_TOKEN_FILE", ""), "`file` holding the bearer token required on /v1 (KEYSVC_TOKEN_FILE); KEYSVC_TOKEN sets it directly")
	version := fs.Bool("version", false, "print keysvc's version (module version and VCS revision) and exit")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: keysvc [flags]\n\nServes idemhook key derivation and reservation over HTTP (see /openapi.json).\n\n"+
			"The --endpoints file is JSON: {\"endpoints\": [{\"name\", \"provider\", \"secret_env\" | \"secret_file\", \"account\",\n"+
			"\"target\", \"target_token_env\" | \"target_token_file\", \"events\", \"max_attempts\", \"concurrency\"}]}: each\n"+
			"field is described in docs/keysvc.md#the-durable-inbox-in-front-of-n8n, and idemhook generate --pattern inbox\n"+
			"--receiver keysvc writes an example (keysvc-endpoints.example.json).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	// --help prints the usage once, on stdout; a mistake, its one line and
	// where the help is, on stderr.
	var msg bytes.Buffer
	fs.SetOutput(&msg)
	err = fs.Parse(args)
	fs.SetOutput(stderr)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		return config{}, 0, false
	}
	if err != nil {
		fmt.Fprintf(stderr, "keysvc: %v\nrun 'keysvc --help' for the flags\n", err)
		return config{}, 2, false
	}
	if *version {
		fmt.Fprintln(stdout, buildinfo.Describe("keysvc"))
		return config{}, 0, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "keysvc: unexpected argument %q\n", fs.Arg(0))
		return config{}, 2, false
	}
	cfg.token = os.Getenv("KEYSVC_TOKEN")
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintf(stderr, "keysvc: read the token file: %v\n", err)
			return config{}, 2, false
		}
		cfg.token = strings.TrimSpace(string(b))
	}
	secrets, err := providerSecrets()
	if err != nil {
		fmt.Fprintf(stderr, "keysvc: %v\n", err)
		return config{}, 2, false
	}
	cfg.secrets = secrets
	if *endpointsFile != "" {
		if cfg.databaseURL == "" {
			fmt.Fprintln(stderr, "keysvc: the inbox (--endpoints) needs PostgreSQL: set DATABASE_URL")
			return config{}, 2, false
		}
		if cfg.endpoints, err = inbox.LoadEndpoints(*endpointsFile, secrets); err != nil {
			fmt.Fprintf(stderr, "keysvc: %v\n", err)
			return config{}, 2, false
		}
		cfg.inboxOpts.CreateSchema = cfg.createSchema
	}
	if cfg.patternSchema != "" && cfg.databaseURL == "" {
		fmt.Fprintln(stderr, "keysvc: --pattern-schema shows the n8n inbox pattern's tables: it needs PostgreSQL (DATABASE_URL)")
		return config{}, 2, false
	}
	if cfg.tokensFile != "" {
		if cfg.tokens, err = readTokens(cfg.tokensFile); err != nil {
			fmt.Fprintf(stderr, "keysvc: %v\n", err)
			return config{}, 2, false
		}
	}
	if _, port, err := net.SplitHostPort(cfg.addr); err != nil || port == "" {
		fmt.Fprintf(stderr, "keysvc: --addr %q: want HOST:PORT, such as 127.0.0.1:8080, or :8080 for every address\n", cfg.addr)
		return config{}, 2, false
	}
	if cfg.databaseURL == "" {
		if dir := filepath.Dir(cfg.dbFile); !isDir(dir) {
			fmt.Fprintf(stderr, "keysvc: --db-file %s: the folder %s does not exist: create it, or give a file in a folder that does (or DATABASE_URL for PostgreSQL)\n", cfg.dbFile, dir)
			return config{}, 2, false
		}
	}
	public := !loopback(cfg.addr)
	if public && cfg.token == "" && cfg.tokens.Len() == 0 && !cfg.insecureNoAuth {
		fmt.Fprintf(stderr, "keysvc: refusing to serve %s without a token: anyone who reaches it could release a processed event's key "+
			"or reserve a real event id first. Set KEYSVC_TOKEN (or --token-file), or --tokens-file with scoped tokens; "+
			"or listen on 127.0.0.1; or, knowing this, pass --insecure-no-auth\n", cfg.addr)
		return config{}, 2, false
	}
	if cfg.rateLimit.Rate < 0 {
		cfg.rateLimit.Rate = 0
		if public {
			cfg.rateLimit.Rate = 100
		}
	}
	if (cfg.tlsCert == "") != (cfg.tlsKey == "") {
		fmt.Fprintln(stderr, "keysvc: --tls-cert and --tls-key go together")
		return config{}, 2, false
	}
	if cfg.maxConnsPerClient < 1 || cfg.readHeaderTimeout <= 0 || cfg.maxHeaderBytes < 4096 {
		fmt.Fprintln(stderr, "keysvc: --max-conns-per-client must be at least 1, --read-header-timeout positive, --max-header-bytes at least 4096")
		return config{}, 2, false
	}
	if cfg.logSample < 1 {
		fmt.Fprintln(stderr, "keysvc: --log-sample must be at least 1")
		return config{}, 2, false
	}
	if cfg.maxBody <= 0 || cfg.readTimeout <= 0 || cfg.writeTimeout <= 0 || cfg.retention < 0 {
		fmt.Fprintln(stderr, "keysvc: --max-body and the timeouts must be positive, --retention zero or positive")
		return config{}, 2, false
	}
	return cfg, 0, true
}

// providerSecrets reads each provider's signing secrets from
// KEYSVC_SECRET_<PROVIDER> (one secret) and KEYSVC_SECRET_<PROVIDER>_FILE
// (one secret per line, for rotations). For standardwebhooks a line is a
// whsec_ secret or a whpk_ public key. A file that cannot be read, or a
// secret of the wrong form (signature.Provider.CheckSecrets), fails, naming
// the variable and the secret's position but never its value.
func providerSecrets() (map[signature.Provider][]string, error) {
	out := map[signature.Provider][]string{}
	for _, p := range signature.Providers {
		name := "KEYSVC_SECRET_" + strings.ToUpper(string(p))
		if v := strings.TrimSpace(os.Getenv(name)); v != "" {
			out[p] = append(out[p], v)
		}
		if file := os.Getenv(name + "_FILE"); file != "" {
			b, err := os.ReadFile(file)
			if err != nil {
				return nil, fmt.Errorf("%s_FILE: %w", name, err)
			}
			for _, line := range strings.Split(string(b), "\n") {
				if line = strings.TrimSpace(line); line != "" {
					out[p] = append(out[p], line)
				}
			}
		}
		if len(out[p]) > 0 {
			if err := p.CheckSecrets(out[p]); err != nil {
				return nil, fmt.Errorf("%s, then the lines of %s_FILE: %w", name, name, err)
			}
		}
	}
	return out, nil
}
