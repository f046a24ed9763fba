// Command keysvc serves idemhook's key derivation and reservation over HTTP
// for low-code tools (n8n's HTTP Request node, Make, Zapier, Power Automate).
//
//	keysvc                                   embedded store in ./keysvc.db
//	DATABASE_URL=postgres://… keysvc         PostgreSQL, shared with n8n workflows
//
// Every flag has an environment variable; `keysvc --help` lists them.
package main

import (
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
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemhook/idemhook/keysvc"
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
	token        string
	secrets      map[signature.Provider][]string
	tolerance    time.Duration
}

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	cfg, code, ok := parseConfig(args, stderr)
	if !ok {
		return code
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.logLevel)); err != nil {
		fmt.Fprintf(stderr, "keysvc: --log-level %q: use debug, info, warn or error\n", cfg.logLevel)
		return 2
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	store, kind, err := openStore(ctx, cfg)
	if err != nil {
		logger.Error("cannot open the store", "error", err)
		return 1
	}
	defer store.Close()

	srv := &http.Server{
		Addr: cfg.addr,
		Handler: keysvc.New(keysvc.Config{Store: store, MaxBodyBytes: cfg.maxBody, Token: cfg.token, Logger: logger,
			Secrets: cfg.secrets, SignatureTolerance: cfg.tolerance}),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       cfg.readTimeout,
		WriteTimeout:      cfg.writeTimeout,
		IdleTimeout:       60 * time.Second,
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		logger.Error("cannot listen", "addr", cfg.addr, "error", err)
		return 1
	}
	if cfg.retention > 0 {
		go cleanupLoop(ctx, store, cfg.retention, logger)
	}
	var providers []string
	for p := range cfg.secrets {
		providers = append(providers, string(p))
	}
	sort.Strings(providers)
	logger.Info("keysvc listening", "addr", ln.Addr().String(), "store", kind, "auth", cfg.token != "",
		"max_body_bytes", cfg.maxBody, "signature_providers", providers)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
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

func openStore(ctx context.Context, cfg config) (keysvc.Store, string, error) {
	if cfg.databaseURL != "" {
		s, err := keysvc.OpenPG(ctx, cfg.databaseURL, keysvc.PGOptions{Table: cfg.table, CreateSchema: cfg.createSchema})
		return s, "postgres", err
	}
	s, err := keysvc.OpenBolt(cfg.dbFile)
	return s, "embedded:" + cfg.dbFile, err
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

func parseConfig(args []string, stderr io.Writer) (config, int, bool) {
	fs := flag.NewFlagSet("keysvc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.StringVar(&cfg.addr, "addr", env("KEYSVC_ADDR", "127.0.0.1:8080"), "listen `address` (KEYSVC_ADDR)")
	fs.StringVar(&cfg.databaseURL, "database-url", env("DATABASE_URL", ""), "PostgreSQL `URL`; empty uses the embedded store (DATABASE_URL)")
	fs.StringVar(&cfg.dbFile, "db-file", env("KEYSVC_DB_FILE", "keysvc.db"), "embedded store `file` (KEYSVC_DB_FILE)")
	fs.StringVar(&cfg.table, "table", env("KEYSVC_TABLE", "processed_events"), "PostgreSQL `table` of reservations, shared with the n8n workflows (KEYSVC_TABLE)")
	createDefault, _ := strconv.ParseBool(env("KEYSVC_CREATE_SCHEMA", "false"))
	fs.BoolVar(&cfg.createSchema, "create-schema", createDefault, "create the PostgreSQL table (with lease columns) if missing (KEYSVC_CREATE_SCHEMA)")
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
		{&cfg.retention, "retention", "KEYSVC_RETENTION", "720h", "delete reservations older than this, hourly; 0 disables"},
		{&cfg.tolerance, "signature-tolerance", "KEYSVC_SIGNATURE_TOLERANCE", "5m", "how far a signed timestamp may be from now, both ways"},
	}
	for _, d := range durations {
		v, err := time.ParseDuration(env(d.env, d.def))
		if err != nil {
			fmt.Fprintf(stderr, "keysvc: %s=%q is not a duration such as 10s\n", d.env, os.Getenv(d.env))
			return config{}, 2, false
		}
		fs.DurationVar(d.p, d.name, v, d.usage+" ("+d.env+")")
	}
	fs.StringVar(&cfg.logLevel, "log-level", env("KEYSVC_LOG_LEVEL", "info"), "debug, info, warn or error (KEYSVC_LOG_LEVEL)")
	tokenFile := fs.String("token-file", env("KEYSVC_TOKEN_FILE", ""), "`file` holding the bearer token required on /v1 (KEYSVC_TOKEN_FILE); KEYSVC_TOKEN sets it directly")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: keysvc [flags]\n\nServes idemhook key derivation and reservation over HTTP (see /openapi.json).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return config{}, 0, false
		}
		return config{}, 2, false
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
	if cfg.maxBody <= 0 || cfg.readTimeout <= 0 || cfg.writeTimeout <= 0 || cfg.retention < 0 {
		fmt.Fprintln(stderr, "keysvc: --max-body and the timeouts must be positive, --retention zero or positive")
		return config{}, 2, false
	}
	return cfg, 0, true
}

// providerSecrets reads each provider's signing secrets from
// KEYSVC_SECRET_<PROVIDER> (one secret) and KEYSVC_SECRET_<PROVIDER>_FILE
// (one secret per line, for rotations).
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
	}
	return out, nil
}
