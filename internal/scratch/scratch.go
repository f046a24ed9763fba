// Package scratch gives one run of idemhook a space of its own on a
// PostgreSQL server the user already runs (a CI job's service container, a
// local server), named by a URL: a scratch database, or, for a user without
// CREATEDB, a scratch schema in the URL's database. Create makes it, Drop
// removes it; nothing else on the server is read or written.
package scratch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// MinServerVersion is the oldest server Create accepts (server_version_num).
const MinServerVersion = 140000

// Prefix starts every database and schema Create makes, so that one left
// behind (--keep, a killed run) says whose it is.
const Prefix = "idemhook_scratch_"

// Space is a scratch database, or a scratch schema, on the user's server.
type Space struct {
	// Name is the scratch database's or the scratch schema's.
	Name string
	// Schema tells that it is a schema in the URL's database: the user may
	// not create databases.
	Schema bool
	// URL connects to it: the scratch database, or the URL's database with
	// the scratch schema alone on its search_path.
	URL string
	// Extra maps each further database asked for (Options.Extra) to its
	// URL.
	Extra map[string]string

	admin   string   // the user's URL
	created []string // databases to drop, or the schema
}

// Options tune Create.
type Options struct {
	// Extra are further databases to create beside the first, by a
	// suffix of their names (n8n's own: "n8n"). They need CREATEDB.
	Extra []string
	// Databases refuses a schema: the run needs databases of its own
	// (verify: n8n and the workflow's SQL cannot be kept in a schema).
	Databases bool
	// Purpose says what the space is for, in the refusal of a user
	// without CREATEDB.
	Purpose string
}

// Reason is why Create refused.
type Reason string

const (
	BadURL      Reason = "bad_url"
	Unreachable Reason = "unreachable"
	Auth        Reason = "authentication"
	NoDatabase  Reason = "no_database"
	TLSRequired Reason = "tls_required"
	NoTLS       Reason = "no_tls"
	NoRights    Reason = "no_rights"
	TooOld      Reason = "too_old"
)

// Error is Create's refusal: one line that says which.
type Error struct {
	Reason Reason
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

func refuse(r Reason, format string, args ...any) error {
	return &Error{Reason: r, Msg: fmt.Sprintf(format, args...)}
}

// Create connects to the server at rawURL and makes the scratch space. It
// refuses, with an *Error and nothing created, a URL it cannot parse or
// reach, a wrong password or a user the server refuses, a database that does
// not exist, a server that requires TLS the URL does not ask for (or the
// reverse), a server older than MinServerVersion, and a user who may create
// neither a database nor (without opts.Databases) a schema.
func Create(ctx context.Context, rawURL string, opts Options) (*Space, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		// Not echoed: a keyword/value string holds its password in clear.
		return nil, refuse(BadURL, "--database-url: want a URL postgres://USER:PASSWORD@HOST:PORT/DATABASE")
	}
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return nil, refuse(BadURL, "--database-url %s: %v", redact(rawURL), errors.Unwrap(err))
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, connectError(cfg, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var version int
	var shown string
	if err := conn.QueryRow(cctx, "SELECT current_setting('server_version_num')::int, current_setting('server_version')").Scan(&version, &shown); err != nil {
		return nil, refuse(Unreachable, "PostgreSQL at %s: %v", where(cfg), err)
	}
	if version < MinServerVersion {
		return nil, refuse(TooOld, "PostgreSQL %s at %s is older than %d: idemhook needs PostgreSQL %d or newer", shown, where(cfg), MinServerVersion/10000, MinServerVersion/10000)
	}

	s := &Space{Name: Prefix + randomSuffix(), admin: rawURL, Extra: map[string]string{}}
	created, err := s.createDatabases(cctx, conn, opts.Extra)
	if err == nil {
		return s, nil
	}
	if !isPrivilege(err) {
		s.created = created
		s.Drop(context.WithoutCancel(ctx))
		return nil, refuse(NoRights, "PostgreSQL at %s: %v", where(cfg), err)
	}
	// The user may not create databases: a schema in the URL's database.
	if opts.Databases || len(opts.Extra) > 0 {
		return nil, refuse(NoRights, "user %s may not create databases on %s (CREATEDB): %s runs in databases of its own; grant it CREATEDB, or give another user",
			cfg.User, where(cfg), opts.Purpose)
	}
	if _, err := conn.Exec(cctx, "CREATE SCHEMA "+pgx.Identifier{s.Name}.Sanitize()); err != nil {
		if isPrivilege(err) {
			return nil, refuse(NoRights, "user %s may create neither a database on %s (CREATEDB) nor a schema in database %s (CREATE on it): grant one of them, or give another user",
				cfg.User, where(cfg), cfg.Database)
		}
		return nil, refuse(NoRights, "PostgreSQL at %s: create a scratch schema: %v", where(cfg), err)
	}
	s.Schema, s.created = true, []string{s.Name}
	q := u.Query()
	q.Set("search_path", s.Name)
	u.RawQuery = q.Encode()
	s.URL = u.String()
	return s, nil
}

// createDatabases creates the scratch database and the extra ones, and
// returns those it created.
func (s *Space) createDatabases(ctx context.Context, conn *pgx.Conn, extra []string) ([]string, error) {
	names := []string{s.Name}
	for _, e := range extra {
		names = append(names, s.Name+"_"+e)
	}
	var created []string
	for _, n := range names {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{n}.Sanitize()); err != nil {
			return created, err
		}
		created = append(created, n)
	}
	s.created = created
	s.URL = withDatabase(s.admin, s.Name)
	for _, e := range extra {
		s.Extra[e] = withDatabase(s.admin, s.Name+"_"+e)
	}
	return created, nil
}

// Drop removes the space: its databases (closing their other connections,
// a run interrupted may have left some) or its schema with everything in
// it. It is safe to call more than once.
func (s *Space) Drop(ctx context.Context) error {
	if len(s.created) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.admin)
	if err != nil {
		return fmt.Errorf("drop %s: %w", s.Name, err)
	}
	defer conn.Close(ctx)
	var errs []error
	for _, n := range s.created {
		stmt := "DROP DATABASE IF EXISTS " + pgx.Identifier{n}.Sanitize() + " WITH (FORCE)"
		if s.Schema {
			stmt = "DROP SCHEMA IF EXISTS " + pgx.Identifier{n}.Sanitize() + " CASCADE"
		}
		if _, err := conn.Exec(ctx, stmt); err != nil {
			errs = append(errs, fmt.Errorf("drop %s: %w", n, err))
		}
	}
	if len(errs) == 0 {
		s.created = nil
	}
	return errors.Join(errs...)
}

// What says what the space is, for the progress lines.
func (s *Space) What() string {
	if s.Schema {
		return "scratch schema " + s.Name
	}
	return "scratch database " + s.Name
}

// connectError says in one line why the server could not be used.
func connectError(cfg *pgx.ConnConfig, err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch {
		case pg.Code == "28P01":
			return refuse(Auth, "PostgreSQL at %s: password authentication failed for user %s", where(cfg), cfg.User)
		case pg.Code == "28000" && strings.Contains(pg.Message, "no encryption"):
			return refuse(TLSRequired, "PostgreSQL at %s requires TLS: add sslmode=require to --database-url", where(cfg))
		case pg.Code == "28000":
			return refuse(Auth, "PostgreSQL at %s refuses user %s: %s", where(cfg), cfg.User, pg.Message)
		case pg.Code == "3D000":
			return refuse(NoDatabase, "PostgreSQL at %s has no database %s: name one that exists in --database-url (postgres, usually)", where(cfg), cfg.Database)
		case pg.Code == "42501":
			return refuse(NoRights, "PostgreSQL at %s: user %s may not connect to database %s", where(cfg), cfg.User, cfg.Database)
		}
		return refuse(Unreachable, "PostgreSQL at %s: %s", where(cfg), pg.Message)
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "server refused TLS connection"):
		return refuse(NoTLS, "PostgreSQL at %s does not offer TLS, which --database-url requires (sslmode): use sslmode=disable or prefer", where(cfg))
	case errors.Is(err, context.DeadlineExceeded):
		return refuse(Unreachable, "PostgreSQL at %s did not answer within 15 s", where(cfg))
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return refuse(Unreachable, "PostgreSQL at %s: no such host", where(cfg))
	}
	if strings.Contains(msg, "connection refused") {
		return refuse(Unreachable, "cannot reach PostgreSQL at %s: connection refused", where(cfg))
	}
	return refuse(Unreachable, "cannot reach PostgreSQL at %s: %v", where(cfg), errors.Unwrap(err))
}

func isPrivilege(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "42501"
}

func where(cfg *pgx.ConnConfig) string {
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}

// redact hides a URL's password.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

func withDatabase(raw, database string) string {
	u, _ := url.Parse(raw)
	u.Path = "/" + database
	return u.String()
}

func randomSuffix() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
