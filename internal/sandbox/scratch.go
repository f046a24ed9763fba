package sandbox

// A scratch space gives one run of idemhook a space of its own on a
// PostgreSQL server the user already runs (a CI job's service container, a
// local server), named by a URL: a scratch database, or, for a user without
// CREATEDB, a scratch schema in the URL's database. CreateScratch makes it,
// Drop removes it; nothing else on the server is read or written.

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

// MinServerVersion is the oldest server CreateScratch accepts (server_version_num).
const MinServerVersion = 140000

// ScratchPrefix starts every database and schema CreateScratch makes, so that one left
// behind (--keep, a killed run) says whose it is.
const ScratchPrefix = "idemhook_scratch_"

// Scratch is a scratch database, or a scratch schema, on the user's server.
type Scratch struct {
	// Name is the scratch database's or the scratch schema's.
	Name string
	// Schema tells that it is a schema in the URL's database: the user may
	// not create databases.
	Schema bool
	// URL connects to it: the scratch database, or the URL's database with
	// the scratch schema alone on its search_path.
	URL string
	// Extra maps each further database asked for (ScratchOptions.Extra) to its
	// URL.
	Extra map[string]string

	admin   string   // the user's URL
	created []string // databases to drop, or the schema
	extra   []string // ScratchOptions.Extra
}

// ScratchOptions tune CreateScratch.
type ScratchOptions struct {
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

// ScratchReason is why CreateScratch refused.
type ScratchReason string

const (
	ScratchBadURL      ScratchReason = "bad_url"
	ScratchUnreachable ScratchReason = "unreachable"
	ScratchAuth        ScratchReason = "authentication"
	ScratchNoDatabase  ScratchReason = "no_database"
	ScratchTLSRequired ScratchReason = "tls_required"
	ScratchNoTLS       ScratchReason = "no_tls"
	ScratchNoRights    ScratchReason = "no_rights"
	ScratchTooOld      ScratchReason = "too_old"
)

// ScratchError is CreateScratch's refusal: one line that says which.
type ScratchError struct {
	Reason ScratchReason
	Msg    string
}

func (e *ScratchError) Error() string { return e.Msg }

func refuse(r ScratchReason, format string, args ...any) error {
	return &ScratchError{Reason: r, Msg: fmt.Sprintf(format, args...)}
}

// CreateScratch connects to the server at rawURL and makes the scratch space. It
// refuses, with an *ScratchError and nothing created, a URL it cannot parse or
// reach, a wrong password or a user the server refuses, a database that does
// not exist, a server that requires TLS the URL does not ask for (or the
// reverse), a server older than MinServerVersion, and a user who may create
// neither a database nor (without opts.Databases) a schema.
func CreateScratch(ctx context.Context, rawURL string, opts ScratchOptions) (*Scratch, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		// Not echoed: a keyword/value string holds its password in clear.
		return nil, refuse(ScratchBadURL, "--database-url: want a URL postgres://USER:PASSWORD@HOST:PORT/DATABASE")
	}
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return nil, refuse(ScratchBadURL, "--database-url %s: %v", redact(rawURL), errors.Unwrap(err))
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
		return nil, refuse(ScratchUnreachable, "PostgreSQL at %s: %v", where(cfg), err)
	}
	if version < MinServerVersion {
		return nil, refuse(ScratchTooOld, "PostgreSQL %s at %s is older than %d: idemhook needs PostgreSQL %d or newer", shown, where(cfg), MinServerVersion/10000, MinServerVersion/10000)
	}

	s := &Scratch{Name: ScratchPrefix + randomSuffix(), admin: rawURL, Extra: map[string]string{}, extra: opts.Extra}
	created, err := s.createDatabases(cctx, conn, opts.Extra)
	if err == nil {
		return s, nil
	}
	if !isPrivilege(err) {
		s.created = created
		s.Drop(context.WithoutCancel(ctx))
		return nil, refuse(ScratchNoRights, "PostgreSQL at %s: %v", where(cfg), err)
	}
	// The user may not create databases: a schema in the URL's database.
	if opts.Databases || len(opts.Extra) > 0 {
		return nil, refuse(ScratchNoRights, "user %s may not create databases on %s (CREATEDB): %s runs in databases of its own; grant it CREATEDB, or give another user",
			cfg.User, where(cfg), opts.Purpose)
	}
	if _, err := conn.Exec(cctx, "CREATE SCHEMA "+pgx.Identifier{s.Name}.Sanitize()); err != nil {
		if isPrivilege(err) {
			return nil, refuse(ScratchNoRights, "user %s may create neither a database on %s (CREATEDB) nor a schema in database %s (CREATE on it): grant one of them, or give another user",
				cfg.User, where(cfg), cfg.Database)
		}
		return nil, refuse(ScratchNoRights, "PostgreSQL at %s: create a scratch schema: %v", where(cfg), err)
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
func (s *Scratch) createDatabases(ctx context.Context, conn *pgx.Conn, extra []string) ([]string, error) {
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
func (s *Scratch) Drop(ctx context.Context) error {
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

// extraNames are the names of the further databases, in the order asked.
func (s *Scratch) extraNames() []string {
	var out []string
	for _, e := range s.extra {
		out = append(out, s.Name+"_"+e)
	}
	return out
}

// names lists what the space is made of: "X", or "X and X_n8n".
func (s *Scratch) names() string {
	return strings.Join(append([]string{s.Name}, s.extraNames()...), " and ")
}

// where says where a run goes: "scratch database X (n8n's in X_n8n)".
func (s *Scratch) where() string {
	w := s.What()
	for i, e := range s.extra {
		w += fmt.Sprintf(" (%s's in %s)", e, s.extraNames()[i])
	}
	return w
}

// kept says what was kept: "scratch database X and X_n8n".
func (s *Scratch) kept() string {
	return strings.Join(append([]string{s.What()}, s.extraNames()...), " and ")
}

// What says what the space is, for the progress lines.
func (s *Scratch) What() string {
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
			return refuse(ScratchAuth, "PostgreSQL at %s: password authentication failed for user %s", where(cfg), cfg.User)
		case pg.Code == "28000" && strings.Contains(pg.Message, "no encryption"):
			return refuse(ScratchTLSRequired, "PostgreSQL at %s requires TLS: add sslmode=require to --database-url", where(cfg))
		case pg.Code == "28000":
			return refuse(ScratchAuth, "PostgreSQL at %s refuses user %s: %s", where(cfg), cfg.User, pg.Message)
		case pg.Code == "3D000":
			return refuse(ScratchNoDatabase, "PostgreSQL at %s has no database %s: name one that exists in --database-url (postgres, usually)", where(cfg), cfg.Database)
		case pg.Code == "42501":
			return refuse(ScratchNoRights, "PostgreSQL at %s: user %s may not connect to database %s", where(cfg), cfg.User, cfg.Database)
		}
		return refuse(ScratchUnreachable, "PostgreSQL at %s: %s", where(cfg), pg.Message)
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "server refused TLS connection"):
		return refuse(ScratchNoTLS, "PostgreSQL at %s does not offer TLS, which --database-url requires (sslmode): use sslmode=disable or prefer", where(cfg))
	case errors.Is(err, context.DeadlineExceeded):
		return refuse(ScratchUnreachable, "PostgreSQL at %s did not answer within 15 s", where(cfg))
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return refuse(ScratchUnreachable, "PostgreSQL at %s: no such host", where(cfg))
	}
	if strings.Contains(msg, "connection refused") {
		return refuse(ScratchUnreachable, "cannot reach PostgreSQL at %s: connection refused", where(cfg))
	}
	return refuse(ScratchUnreachable, "cannot reach PostgreSQL at %s: %v", where(cfg), errors.Unwrap(err))
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
