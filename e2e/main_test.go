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
	"slices"
	"strings"
	"testing"
	"time"

	idemdeploy "github.com/idemhook/idemhook/internal/deploy"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/n8napi"
	"github.com/idemhook/idemhook/internal/sandbox"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

var (
	st *sandbox.Stack
	// api is n8n's public API on st, with apiKey; deploy uses it as
	// `idemhook deploy` does.
	api    *n8napi.Client
	apiKey string
)

const credentialName = "Postgres (idemhook e2e)"

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // every test skips itself in -short mode
	}
	switch part() {
	case "":
		os.Exit(runParts())
	case partOwn:
		os.Exit(m.Run()) // each test starts the stack it needs
	}
	ctx := context.Background()
	tlsDir, err := os.MkdirTemp("", "idemhook-e2e-tls-")
	if err == nil {
		e2eTLS, err = newTestTLS(tlsDir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cannot make the tests' certificates:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(tlsDir)
	// n8n trusts the tests' CA, as an operator gives n8n a private one:
	// keysvc serves HTTPS with a certificate it signed.
	st, err = sandbox.Start(ctx, sandbox.Options{Why: "the e2e tests run them", CommunityNode: true, CommunityNodeCustom: true,
		N8NEnv: map[string]string{"NODE_EXTRA_CA_CERTS": e2eTLS.CAFile}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cannot start the stack:", err)
		os.Exit(1)
	}
	stopWatching := st.CloseOnSignal()
	code := setupAndRun(ctx, m)
	stopWatching()
	// Said last, where a CI log's tail shows it.
	for _, e := range st.UnexpectedExits() {
		fmt.Fprintf(os.Stderr, "e2e: %s\n", e)
	}
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
	if err := deployRunner(ctx, dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: deploy the runner workflow:", err)
		return 1
	}
	if err := connectAPI(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	return m.Run()
}

// connectAPI creates st's n8n owner account and an API key.
func connectAPI(ctx context.Context) error {
	key, err := n8napi.SetupOwner(ctx, st.N8NURL, "e2e@idemhook.local", "E2e-password-1")
	if err != nil {
		return err
	}
	c, err := n8napi.New(st.N8NURL, key)
	if err != nil {
		return err
	}
	api, apiKey = c, key
	return nil
}

func needStack(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: skipped with -short")
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	if p := part(); p != partAll && (p == partOwn) != slices.Contains(ownStackTests, top) {
		t.Skipf("runs in this package's other process (%s), beside this one", partEnv)
	}
	if st != nil && !slices.Contains(ownStackTests, top) {
		watchSharedStack(t, st)
	}
}

// watchSharedStack fails t when a process of the shared stack s exits on
// its own while t runs, with when and the end of its log, and starts it
// again, so that the tests after t run instead of all failing with
// "connection refused".
func watchSharedStack(t *testing.T, s *sandbox.Stack) {
	seen := len(s.UnexpectedExits())
	t.Cleanup(func() {
		exits := s.UnexpectedExits()
		if len(exits) == seen {
			return
		}
		for _, e := range exits[seen:] {
			t.Errorf("the shared stack broke while this test ran: %s", e)
		}
		if err := s.Revive(context.Background()); err != nil {
			t.Errorf("start the shared stack again: %v", err)
		}
	})
}

// useStack starts a stack of its own for opts (queue mode, another
// PostgreSQL), prepares it as TestMain prepares the main one, and points
// the package's helpers at it until the test ends.
func useStack(t *testing.T, opts sandbox.Options) *sandbox.Stack {
	t.Helper()
	ctx := context.Background()
	// Every n8n of the tests has the community node, as the main one.
	opts.CommunityNode = true
	s, err := sandbox.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	main, mainAPI, mainKey := st, api, apiKey
	st = s
	t.Cleanup(func() {
		st, api, apiKey = main, mainAPI, mainKey
		if t.Failed() {
			t.Logf("this stack's logs are kept in %s", s.LogDir)
		}
		s.Close()
	})
	dir := t.TempDir()
	file := filepath.Join(dir, "credentials.json")
	if err := os.WriteFile(file, s.PostgresCredential("idemhookE2ECred1", credentialName), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.ImportCredentials(ctx, file); err != nil {
		t.Fatal(err)
	}
	importSecretCredential(t, inboxSecretCredential, stripeSecret)
	if err := deployRunner(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if err := connectAPI(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// claimed maps each workflow name deployed on a stack to the test that
// deployed it. Deploy updates a workflow of the same name in place, so two
// tests sharing a name would read each other's executions and rows.
var claimed = map[*sandbox.Stack]map[string]string{}

func claimName(t *testing.T, name string) {
	t.Helper()
	if claimed[st] == nil {
		claimed[st] = map[string]string{}
	}
	if by, ok := claimed[st][name]; ok && by != t.Name() && by != shared {
		t.Fatalf("workflow %q is already deployed by %s: give this test its own prefix", name, by)
	}
	if claimed[st][name] != shared {
		claimed[st][name] = t.Name()
	}
}

const shared = "(shared)"

// shareName lets several tests deploy workflows named name on the stack,
// for a helper whose tests each use data of their own.
func shareName(name string) {
	if claimed[st] == nil {
		claimed[st] = map[string]string{}
	}
	claimed[st][name] = shared
}

// deployment is a generated pattern deployed and published in n8n.
type deployment struct {
	opts generator.Options
	// workflowID is the workflow that serves the webhook (workflow.json, or
	// the inbox pattern's receiver); ids has every workflow by file name.
	workflowID string
	cleanupID  string
	ids        map[string]string
	url        string
	dir        string // the generated files
}

// deploy generates the files for opts exactly as `idemhook generate` does,
// creates the schema, and deploys every workflow but the cleanup through
// n8n's public API as `idemhook deploy` does (package deploy). d.ids and
// d.workflowID are the ids n8n assigned.
func deploy(t *testing.T, opts generator.Options) deployment {
	t.Helper()
	opts.CredentialName = credentialName
	return deployOn(t, opts, st.Business)
}

// deployOn is deploy for workflows whose Postgres credential (named in
// opts) points at another database than the stack's, business: the schema
// is created there.
func deployOn(t *testing.T, opts generator.Options, business *pgxpool.Pool) deployment {
	t.Helper()
	return deployOnEdited(t, opts, business, nil)
}

// deployEdited is deploy for the generated files as edit changes them (a
// user's edit of the generated workflow).
func deployEdited(t *testing.T, opts generator.Options, edit func(files map[string][]byte)) deployment {
	t.Helper()
	opts.CredentialName = credentialName
	return deployOnEdited(t, opts, st.Business, edit)
}

func deployOnEdited(t *testing.T, opts generator.Options, business *pgxpool.Pool, edit func(files map[string][]byte)) deployment {
	t.Helper()
	ctx := context.Background()
	claimName(t, opts.WorkflowName)
	files, err := generator.Files(opts)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(files)
	}
	dir := t.TempDir()
	if err := writeFiles(dir, files); err != nil {
		t.Fatal(err)
	}
	if _, err := business.Exec(ctx, string(files["schema.sql"])); err != nil {
		t.Fatalf("schema: %v", err)
	}
	ws, err := idemdeploy.Load(files)
	if err != nil {
		t.Fatal(err)
	}
	d := deployment{opts: opts, ids: map[string]string{}, dir: dir}
	ws = slices.DeleteFunc(ws, func(w idemdeploy.Workflow) bool {
		if w.File == generator.FileCleanup {
			d.cleanupID = w.GeneratedID
			return true
		}
		return false
	})
	deployed, err := idemdeploy.Deploy(ctx, api, ws, idemdeploy.Options{WebhookURL: st.WebhookURL})
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	for _, w := range deployed {
		d.ids[w.File] = w.ID
		if w.URL != "" {
			d.workflowID, d.url = w.ID, w.URL
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			for file, id := range d.ids {
				execs, _ := st.Executions(context.Background(), id)
				t.Logf("%s (%s) executions: %s", file, id, executionIDs(execs))
			}
			t.Logf("n8n and PostgreSQL logs: %s", strings.Join(st.Logs(), ", "))
		}
	})
	return d
}

// writeFiles writes generated files into dir, as `idemhook generate` does.
func writeFiles(dir string, files map[string][]byte) error {
	_, err := generator.WriteFiles(dir, files)
	return err
}

type response struct {
	status     int
	body       string
	retryAfter string // the Retry-After header
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
	return sendWithTimeout(url, contentType, body, header, 60*time.Second)
}

func sendWithTimeout(url, contentType string, body []byte, header map[string]string, timeout time.Duration) (response, error) {
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
	client := http.Client{Timeout: timeout}
	resp, err := client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return response{status: resp.StatusCode, body: string(b), retryAfter: resp.Header.Get("Retry-After")}, nil
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
func executionIDs(execs []sandbox.Execution) string {
	var b strings.Builder
	for i, e := range execs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s(%s)", e.ID, e.Status)
	}
	return b.String()
}
