package keysvc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc/console"
	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/internal/pgsql"
)

// ServiceConfig is what StartService assembles into a running keysvc.
type ServiceConfig struct {
	// DatabaseURL is PostgreSQL's (with PG's table options); empty: the
	// embedded store in DBFile.
	DatabaseURL string
	PG          PGOptions
	DBFile      string
	// Endpoints are the inbox's routes (they need PostgreSQL); none: no
	// inbox. Inbox tunes it (its Logger is Logger).
	Endpoints []inbox.Endpoint
	Inbox     inbox.Options
	// PatternSchema names the schema of the n8n inbox pattern whose tables
	// the console shows (PostgreSQL only); "": none.
	PatternSchema string
	// Handler configures the routes; StartService sets its Store, Inbox,
	// Pattern and Logger.
	Handler Config
	// Addr is where it listens, HOST:PORT (port 0: a free one).
	Addr string
	// TLSCert and TLSKey, both or neither, serve HTTPS (and HTTP/2).
	TLSCert, TLSKey string
	// The HTTP server's limits (zero: none); MaxConnsPerClient bounds the
	// connections one client address holds (zero: no bound).
	ReadHeaderTimeout, ReadTimeout, WriteTimeout time.Duration
	MaxHeaderBytes, MaxConnsPerClient            int
	// Retention deletes reservations older than it, hourly (zero: never).
	Retention time.Duration
	// Logger receives the JSON log lines; nil discards them.
	Logger *slog.Logger
}

// Service is keysvc running: its store, its inbox, the console's view of
// the inbox pattern, and the HTTP server in front of them. cmd/keysvc and
// the lab both run one, so they start and stop it the same way.
type Service struct {
	// URL is http(s)://ADDRESS it serves at.
	URL string
	// Handler is the routes, for what changes while it runs (SetTokens).
	Handler *Server

	logger *slog.Logger
	store  Store
	inbox  *inbox.Inbox
	srv    *http.Server
	cert   *certificate // nil without TLS
	done   chan error
	// cancel ends the background work (the hourly cleanup).
	cancel context.CancelFunc
}

// StartService opens the store, opens and starts the inbox, opens the
// console's view of the pattern, listens and serves. ctx bounds the start;
// the service then runs until Close. When a step fails, what the earlier
// ones opened is closed again and the error says which step.
func StartService(ctx context.Context, cfg ServiceConfig) (_ *Service, err error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Service{logger: logger, done: make(chan error, 1), cancel: cancel}
	defer func() {
		if err != nil {
			s.stop(context.Background(), false)
		}
	}()
	kind, err := s.openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	handler := cfg.Handler
	handler.Store, handler.Logger = s.store, logger
	if handler.Inbox, handler.Pattern, err = s.openInbox(ctx, life, cfg, logger); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("--addr: %w", err)
	}
	s.Handler = New(handler)
	if cfg.MaxConnsPerClient > 0 {
		ln = s.Handler.LimitConnections(ln, cfg.MaxConnsPerClient)
	}
	s.URL = "http://" + ln.Addr().String()
	if cfg.TLSCert != "" {
		if s.cert, err = loadCertificate(cfg.TLSCert, cfg.TLSKey, logger); err != nil {
			ln.Close()
			return nil, err
		}
		s.URL = "https://" + ln.Addr().String()
	}
	s.srv = &http.Server{
		Handler:           s.Handler,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	if cfg.Retention > 0 {
		go cleanupLoop(life, s.store, cfg.Retention, logger, s.Handler.metrics.watchRetention())
	}
	s.logListening(ln, kind, cfg)
	go func() {
		if s.cert != nil {
			// HTTP/2 on, as net/http offers it over TLS; the certificate
			// is read again when its files change (certificate.get).
			s.srv.TLSConfig = &tls.Config{GetCertificate: s.cert.get, MinVersion: tls.VersionTLS12}
			s.done <- s.srv.ServeTLS(ln, "", "")
			return
		}
		s.done <- s.srv.Serve(ln)
	}()
	return s, nil
}

// openStore opens PostgreSQL's store, or the embedded one, and names it
// for the log.
func (s *Service) openStore(ctx context.Context, cfg ServiceConfig) (kind string, err error) {
	if cfg.DatabaseURL != "" {
		pg, err := OpenPG(ctx, cfg.DatabaseURL, cfg.PG)
		if err != nil {
			return "", err
		}
		s.store = pg
		return "postgres", nil
	}
	bolt, err := OpenBolt(cfg.DBFile)
	if err != nil {
		return "", fmt.Errorf("--db-file: %w", err)
	}
	s.store = bolt
	return "embedded:" + cfg.DBFile, nil
}

// openInbox opens and starts the inbox when cfg has endpoints, and the
// console's view of the pattern when it asks for one; both read
// PostgreSQL. The inbox's workers live until Close (life), not ctx.
func (s *Service) openInbox(ctx, life context.Context, cfg ServiceConfig, logger *slog.Logger) (*inbox.Inbox, *console.Pattern, error) {
	pg, _ := s.store.(*PGStore)
	if (len(cfg.Endpoints) > 0 || cfg.PatternSchema != "") && pg == nil {
		return nil, nil, errors.New("the inbox and the console's pattern views need PostgreSQL")
	}
	var pattern *console.Pattern
	if len(cfg.Endpoints) > 0 {
		opts := cfg.Inbox
		opts.Logger = logger
		in, err := inbox.Open(ctx, pg.Pool(), cfg.Endpoints, opts)
		if err != nil {
			return nil, nil, fmt.Errorf("open the inbox: %w", err)
		}
		if err := in.Start(life); err != nil {
			return nil, nil, fmt.Errorf("start the inbox: %w", err)
		}
		s.inbox = in
		logger.Info("inbox started", "worker", in.WorkerID())
	}
	if cfg.PatternSchema != "" {
		var err error
		if pattern, err = console.OpenPattern(ctx, pg.Pool(), cfg.PatternSchema, logger); err != nil {
			return nil, nil, fmt.Errorf("--pattern-schema: %w", err)
		}
	}
	return s.inbox, pattern, nil
}

func (s *Service) logListening(ln net.Listener, kind string, cfg ServiceConfig) {
	var providers []string
	for p := range cfg.Handler.Secrets {
		providers = append(providers, string(p))
	}
	slices.Sort(providers)
	var endpoints []string
	for _, e := range cfg.Endpoints {
		endpoints = append(endpoints, e.Name)
	}
	tokens := cfg.Handler.Tokens.Len()
	if cfg.Handler.Token != "" {
		tokens++
	}
	s.logger.Info("keysvc listening", "addr", ln.Addr().String(), "store", kind, "tokens", tokens,
		"tls", cfg.TLSCert != "", "max_body_bytes", cfg.Handler.MaxBodyBytes, "rate_limit", cfg.Handler.RateLimit.Rate, "signature_providers", providers,
		"inbox_endpoints", endpoints)
}

// ReloadCertificate reads the TLS certificate's files again now (keysvc
// does on SIGHUP); without TLS it does nothing. A pair that does not load
// is an error, and the previous certificate is still served.
func (s *Service) ReloadCertificate() error {
	if s.cert == nil {
		return nil
	}
	return s.cert.Reload()
}

// Done receives the server's error when it stops serving by itself (the
// listener failed); Close does not send on it.
func (s *Service) Done() <-chan error { return s.done }

// Close stops the service in its one order: the HTTP server first, which
// stops accepting and lets requests in flight finish (one may be saving a
// delivery in the inbox, or a reservation in the store) until ctx ends;
// then the inbox, whose forwards in flight finish and record their outcome;
// last the store, whose pool both of them used. The inbox and the store are
// closed even when ctx ended first, and the first error is returned.
func (s *Service) Close(ctx context.Context) error {
	s.logger.Info("shutting down: finishing in-flight requests")
	return s.stop(ctx, true)
}

// stop closes what is open, in Close's order, logging each step;
// serving is false when StartService failed before the server served.
func (s *Service) stop(ctx context.Context, serving bool) error {
	var errs []error
	if serving {
		errs = append(errs, s.srv.Shutdown(ctx))
		s.logger.Debug("shutdown: requests finished")
	}
	if s.inbox != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		errs = append(errs, s.inbox.Close(stopCtx))
		cancel()
		s.logger.Debug("shutdown: inbox stopped")
	}
	// The inbox's workers were started with life: ending it earlier would
	// cancel the forwards in flight.
	s.cancel()
	if s.store != nil {
		errs = append(errs, s.store.Close())
		s.logger.Debug("shutdown: store closed")
	}
	return errors.Join(errs...)
}

// Cleanup deletes the reservations first seen before cutoff now, as the
// retention does every hour: in transactions of pgsql.CleanupBatchSize
// keys, with reservations going on between them.
func (s *Service) Cleanup(ctx context.Context, cutoff time.Time) (Cleaned, error) {
	return s.store.Cleanup(ctx, cutoff, pgsql.CleanupBatchSize)
}

// cleanupLoop deletes reservations older than retention, hourly, and
// records each run in the log and its metrics.
func cleanupLoop(ctx context.Context, store Store, retention time.Duration, logger *slog.Logger, record *retentionMetrics) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		start := time.Now()
		c, err := store.Cleanup(ctx, start.Add(-retention), pgsql.CleanupBatchSize)
		if errors.Is(err, context.Canceled) {
			return
		}
		record.ran(start, c, err)
		if err != nil {
			logger.Warn("cleanup failed", "error", err, "deleted", c.Deleted)
		} else if c.Deleted > 0 {
			logger.Info("cleanup", "deleted", c.Deleted, "transactions", c.Transactions)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
