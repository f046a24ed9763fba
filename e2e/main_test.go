// Package e2e proves the generated workflows inside real n8n 2.x against
// real PostgreSQL 16, with deliveries over real HTTP. The stack starts once
// for the package (see package stack); `go test -short` skips it.
package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/e2e/stack"
	"github.com/idemhook/idemhook/generator"
	"github.com/jackc/pgx/v5"
)

var st *stack.Stack

const credentialName = "Postgres (idemhook e2e)"

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // every test skips itself in -short mode
	}
	ctx := context.Background()
	var err error
	st, err = stack.Start(ctx, stack.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cannot start the stack:", err)
		os.Exit(1)
	}
	stopWatching := st.CloseOnSignal()
	code := setupAndRun(ctx, m)
	stopWatching()
	st.Close()
	fmt.Fprintf(os.Stderr, "e2e: n8n and PostgreSQL logs kept in %s\n", st.LogDir)
	os.Exit(code)
}

func setupAndRun(ctx context.Context, m *testing.M) int {
	dir, err := os.MkdirTemp("", "idemhook-e2e-cred-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "credentials.json")
	if err := os.WriteFile(file, st.PostgresCredential("idemhookE2ECred1", credentialName), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if err := st.ImportCredentials(ctx, file); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: import the Postgres credential:", err)
		return 1
	}
	return m.Run()
}

func needStack(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: skipped with -short")
	}
}

// deployment is a generated workflow imported and published in n8n.
type deployment struct {
	opts       generator.Options
	workflowID string
	cleanupID  string
	url        string
	dir        string // the generated files
}

// deploy generates the files for opts exactly as `idemhook generate` does,
// creates the schema, and imports and publishes the workflow through the
// n8n CLI.
func deploy(t *testing.T, opts generator.Options) deployment {
	t.Helper()
	ctx := context.Background()
	opts.CredentialName = credentialName
	files, err := generator.Files(opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Business.Exec(ctx, string(files["schema.sql"])); err != nil {
		t.Fatalf("schema: %v", err)
	}
	id, cleanupID, err := generator.WorkflowIDs(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Deploy(ctx, filepath.Join(dir, "workflow.json")); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	d := deployment{opts: opts, workflowID: id, cleanupID: cleanupID, dir: dir,
		url: st.N8NURL + "/webhook/" + opts.WebhookPath}
	t.Cleanup(func() {
		if t.Failed() {
			execs, _ := st.Executions(context.Background(), id)
			t.Logf("workflow %s executions: %v", id, execs)
			t.Logf("n8n and PostgreSQL logs: %s", strings.Join(st.Logs(), ", "))
		}
	})
	return d
}

type response struct {
	status int
	body   string
}

// post delivers body to url over real HTTP.
func post(t *testing.T, url, contentType string, body []byte, header map[string]string) response {
	t.Helper()
	r, err := send(url, contentType, body, header)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return r
}

// postNoFatal is post for goroutines: a transport error becomes status 0.
func postNoFatal(url, contentType string, body []byte) response {
	r, err := send(url, contentType, body, nil)
	if err != nil {
		return response{body: err.Error()}
	}
	return r
}

func send(url, contentType string, body []byte, header map[string]string) (response, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return response{}, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := http.Client{Timeout: 60 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return response{status: resp.StatusCode, body: string(b)}, nil
}

// ident quotes a table name that may be schema-qualified.
func ident(table string) string {
	return pgx.Identifier(strings.Split(table, ".")).Sanitize()
}

func countRows(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := st.Business.QueryRow(context.Background(), "SELECT count(*) FROM "+ident(table)).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func storedKeys(t *testing.T, table string) []string {
	t.Helper()
	rows, err := st.Business.Query(context.Background(), "SELECT key FROM "+ident(table)+" ORDER BY first_seen, key")
	if err != nil {
		t.Fatalf("keys of %s: %v", table, err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func hasKey(t *testing.T, table, key string) bool {
	t.Helper()
	var n int
	if err := st.Business.QueryRow(context.Background(), "SELECT count(*) FROM "+ident(table)+" WHERE key = $1", key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// executionIDs formats executions for failure messages.
func executionIDs(execs []stack.Execution) string {
	var b strings.Builder
	for i, e := range execs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s(%s)", e.ID, e.Status)
	}
	return b.String()
}
