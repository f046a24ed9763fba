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
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
)

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
	svc, err := keysvc.StartService(ctx, cfg.service(logger))
	if err != nil {
		return cannotStart(stderr, err)
	}
	go reloadOnHUP(ctx, cfg, svc, logger)
	if cfg.insecureNoAuth {
		warnInsecure(ctx, logger)
	}
	code = 0
	select {
	case err := <-svc.Done():
		logger.Error("server stopped", "error", err)
		code = 1
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := svc.Close(shutdownCtx); err != nil {
		logger.Error("shutdown", "error", err)
		return 1
	}
	logger.Info("stopped")
	return code
}

// service is the keysvc cfg describes, logging to logger.
func (cfg config) service(logger *slog.Logger) keysvc.ServiceConfig {
	return keysvc.ServiceConfig{
		DatabaseURL: cfg.databaseURL, PG: keysvc.PGOptions{Table: cfg.table, CreateSchema: cfg.createSchema}, DBFile: cfg.dbFile,
		Endpoints: cfg.endpoints, Inbox: cfg.inboxOpts, PatternSchema: cfg.patternSchema,
		Handler: keysvc.Config{MaxBodyBytes: cfg.maxBody, Token: cfg.token, Tokens: cfg.tokens, Secrets: cfg.secrets, SignatureTolerance: cfg.tolerance,
			HideBodies: !cfg.consoleBodies, LogSample: cfg.logSample, SignatureAuth: cfg.signatureAuth, ProtectMetrics: cfg.protectMetrics, RateLimit: cfg.rateLimit},
		Addr: cfg.addr, TLSCert: cfg.tlsCert, TLSKey: cfg.tlsKey,
		ReadHeaderTimeout: cfg.readHeaderTimeout, ReadTimeout: cfg.readTimeout, WriteTimeout: cfg.writeTimeout,
		MaxHeaderBytes: cfg.maxHeaderBytes, MaxConnsPerClient: cfg.maxConnsPerClient,
		Retention: cfg.retention, Logger: logger,
	}
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

// reloadOnHUP re-reads the tokens file and the TLS certificate on SIGHUP:
// a removed token is refused from the next request on, a renewed
// certificate is served from the next handshake, without a restart. A
// tokens file that does not parse, or a certificate that does not load,
// leaves what was served before.
func reloadOnHUP(ctx context.Context, cfg config, svc *keysvc.Service, logger *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		_ = svc.ReloadCertificate() // it logs what it did
		if cfg.tokensFile == "" {
			continue
		}
		tokens, err := readTokens(cfg.tokensFile)
		if err != nil {
			logger.Error("tokens file not reloaded; the previous tokens stay", "error", err)
			continue
		}
		if cfg.token != "" {
			tokens = keysvc.FullToken(cfg.token).Merge(tokens)
		}
		svc.Handler.SetTokens(tokens)
		logger.Info("tokens reloaded", "tokens", tokens.Len())
	}
}

// warnInsecure says now (as keysvc starts serving) and then every hour until
// ctx ends that anyone who reaches keysvc may release keys.
func warnInsecure(ctx context.Context, logger *slog.Logger) {
	warn := func() {
		logger.Warn("keysvc serves every route to anyone who reaches it (--insecure-no-auth): anyone can release a processed event's key or reserve a real event id first")
	}
	warn()
	go func() {
		t := time.NewTicker(time.Hour)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				warn()
			}
		}
	}()
}
