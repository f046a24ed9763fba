package sandbox_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/sandbox"
	"github.com/jackc/pgx/v5"
)

// server starts a PostgreSQL server as a separate process, as a CI job's
// service container is one, and returns the URL a user would give of it.
func server(t *testing.T, opts sandbox.Options) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts PostgreSQL; skipped with -short")
	}
	opts.PostgresOnly, opts.Progress = true, os.Stderr
	s, err := sandbox.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.BusinessDSN
}

// as is rawURL for another user and password, and more query parameters.
func as(rawURL, user, password string, query ...string) string {
	u, _ := url.Parse(rawURL)
	u.User = url.UserPassword(user, password)
	q := u.Query()
	for i := 0; i+1 < len(query); i += 2 {
		q.Set(query[i], query[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func exec(t *testing.T, rawURL string, sql ...string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), rawURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, s := range sql {
		if _, err := conn.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// inventory lists the server's databases and the schemas of the URL's
// database: what a run must leave as it found it.
func inventory(t *testing.T, admin string) []string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT 'database ' || datname FROM pg_database UNION ALL SELECT 'schema ' || nspname FROM pg_namespace ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// A superuser (a CI service container's) gets a scratch database; a user
// with CREATE on the database but not CREATEDB a scratch schema, which its
// unqualified tables land in. Drop leaves the server as it was.
func TestCreateAndDrop(t *testing.T) {
	admin := server(t, sandbox.Options{})
	exec(t, admin, `CREATE ROLE schemas_only LOGIN PASSWORD 'pw-schemas'`, `GRANT CREATE ON DATABASE idemhook TO schemas_only`)
	before := inventory(t, admin)
	for _, c := range []struct {
		name, url string
		schema    bool
	}{
		{"superuser", admin, false},
		{"without CREATEDB", as(admin, "schemas_only", "pw-schemas"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := sandbox.CreateScratch(context.Background(), c.url, sandbox.ScratchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if s.Schema != c.schema || !strings.HasPrefix(s.Name, sandbox.ScratchPrefix) {
				t.Fatalf("space %+v, want schema %v", s, c.schema)
			}
			exec(t, s.URL, `CREATE TABLE effects (id text PRIMARY KEY)`, `INSERT INTO effects VALUES ('e1')`)
			var where string
			conn, _ := pgx.Connect(context.Background(), s.URL)
			conn.QueryRow(context.Background(), `SELECT current_database() || '.' || schemaname FROM pg_tables WHERE tablename = 'effects'`).Scan(&where)
			conn.Close(context.Background())
			want := s.Name + ".public"
			if c.schema {
				want = "idemhook." + s.Name
			}
			if where != want {
				t.Errorf("the table is in %s, want %s", where, want)
			}
			if err := s.Drop(context.Background()); err != nil {
				t.Fatal(err)
			}
			if after := inventory(t, admin); !slices.Equal(before, after) {
				t.Errorf("after Drop the server has\n%v\nbefore\n%v", after, before)
			}
		})
	}
}

// Every refusal is one line that says which, and leaves nothing on the
// server; a password is never repeated.
func TestCreateRefuses(t *testing.T) {
	admin := server(t, sandbox.Options{})
	exec(t, admin, `CREATE ROLE no_rights LOGIN PASSWORD 'pw-none'`, `CREATE ROLE schemas_only LOGIN PASSWORD 'pw-schemas'`,
		`GRANT CREATE ON DATABASE idemhook TO schemas_only`, `CREATE DATABASE locked`, `REVOKE CONNECT ON DATABASE locked FROM PUBLIC`)
	u, _ := url.Parse(admin)
	missing, closed := *u, *u
	missing.Path = "/no_such_database"
	closed.Host = "127.0.0.1:1"
	locked := *u
	locked.Path = "/locked"
	before := inventory(t, admin)
	for _, c := range []struct {
		name, url string
		opts      sandbox.ScratchOptions
		reason    sandbox.ScratchReason
		says      string
	}{
		{"wrong password", as(admin, "postgres", "not-the-password"), sandbox.ScratchOptions{}, sandbox.ScratchAuth, "password authentication failed for user postgres"},
		{"no such database", missing.String(), sandbox.ScratchOptions{}, sandbox.ScratchNoDatabase, "has no database no_such_database"},
		{"nothing listening", closed.String(), sandbox.ScratchOptions{}, sandbox.ScratchUnreachable, "connection refused"},
		{"not a URL", "host=127.0.0.1 password=secret-in-dsn", sandbox.ScratchOptions{}, sandbox.ScratchBadURL, "want a URL postgres://"},
		{"neither CREATEDB nor CREATE", as(admin, "no_rights", "pw-none"), sandbox.ScratchOptions{}, sandbox.ScratchNoRights, "may create neither a database"},
		{"may not connect", as(locked.String(), "no_rights", "pw-none"), sandbox.ScratchOptions{}, sandbox.ScratchNoRights, "may not connect to database locked"},
		{"databases needed", as(admin, "schemas_only", "pw-schemas"), sandbox.ScratchOptions{Databases: true, Purpose: "verify"}, sandbox.ScratchNoRights, "may not create databases"},
		{"TLS offered by none", as(admin, "postgres", "idemhook-sandbox", "sslmode", "require"), sandbox.ScratchOptions{}, sandbox.ScratchNoTLS, "does not offer TLS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := sandbox.CreateScratch(context.Background(), c.url, c.opts)
			var e *sandbox.ScratchError
			if !errors.As(err, &e) || e.Reason != c.reason || !strings.Contains(e.Msg, c.says) || strings.Contains(e.Msg, "\n") {
				t.Fatalf("Create: %v, want one line (%s) saying %q", err, c.reason, c.says)
			}
			for _, pw := range []string{"not-the-password", "pw-none", "pw-schemas", "secret-in-dsn", "idemhook-sandbox"} {
				if strings.Contains(e.Msg, pw) {
					t.Errorf("the refusal repeats a password: %s", e.Msg)
				}
			}
			if after := inventory(t, admin); !slices.Equal(before, after) {
				t.Errorf("after the refusal the server has\n%v\nbefore\n%v", after, before)
			}
		})
	}
}

// A server that takes TLS connections only: a URL without TLS is refused
// with the way out, one with sslmode=require works.
func TestCreateOnATLSOnlyServer(t *testing.T) {
	admin := server(t, sandbox.Options{PostgresTLS: true})
	exec(t, admin, `CREATE ROLE ci LOGIN CREATEDB PASSWORD 'pw-ci'`)
	before := inventory(t, admin)
	_, err := sandbox.CreateScratch(context.Background(), as(admin, "ci", "pw-ci"), sandbox.ScratchOptions{})
	var e *sandbox.ScratchError
	if !errors.As(err, &e) || e.Reason != sandbox.ScratchTLSRequired || !strings.Contains(e.Msg, "sslmode=require") {
		t.Fatalf("without TLS: %v, want TLSRequired naming sslmode=require", err)
	}
	if after := inventory(t, admin); !slices.Equal(before, after) {
		t.Errorf("after the refusal the server has %v, before %v", after, before)
	}
	s, err := sandbox.CreateScratch(context.Background(), as(admin, "ci", "pw-ci", "sslmode", "require"), sandbox.ScratchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exec(t, s.URL, `CREATE TABLE t (x int)`)
	if err := s.Drop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after := inventory(t, admin); !slices.Equal(before, after) {
		t.Errorf("after Drop the server has %v, before %v", after, before)
	}
}

// A server older than PostgreSQL 14 is refused, nothing created.
func TestCreateRefusesAnOldServer(t *testing.T) {
	admin := server(t, sandbox.Options{PostgresMajor: "13"})
	before := inventory(t, admin)
	_, err := sandbox.CreateScratch(context.Background(), admin, sandbox.ScratchOptions{})
	var e *sandbox.ScratchError
	if !errors.As(err, &e) || e.Reason != sandbox.ScratchTooOld || !strings.Contains(e.Msg, "PostgreSQL 14 or newer") {
		t.Fatalf("PostgreSQL 13: %v, want TooOld", err)
	}
	if after := inventory(t, admin); !slices.Equal(before, after) {
		t.Errorf("after the refusal the server has %v, before %v", after, before)
	}
}
