package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/sandbox"
	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v4"
)

// ciCommands are the idemhook commands a CI file of docs/ci runs: the
// `run:` steps of a GitHub Actions workflow, the `script:` lines of a GitLab
// CI job.
func ciCommands(t *testing.T, file string) []string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var lines []string
	if jobs, ok := doc["jobs"].(map[string]any); ok { // GitHub Actions
		for _, j := range jobs {
			steps, _ := j.(map[string]any)["steps"].([]any)
			for _, s := range steps {
				if run, ok := s.(map[string]any)["run"].(string); ok {
					lines = append(lines, strings.Split(run, "\n")...)
				}
			}
		}
	} else { // GitLab CI: every job's script
		for _, j := range doc {
			job, _ := j.(map[string]any)
			script, _ := job["script"].([]any)
			for _, l := range script {
				lines = append(lines, fmt.Sprint(l))
			}
		}
	}
	var out []string
	for _, l := range lines {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "idemhook ") {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// docs/ci's GitHub Actions and GitLab CI files, run here: their idemhook
// commands run in a copy of docs/ci/example against a PostgreSQL started as
// a process of its own, as a job's service container is, through
// DATABASE_URL. rules test installs nothing (an empty cache stays empty);
// verify installs no PostgreSQL (its cache holds Node and n8n only); both
// leave the server's databases as they found them. Without --database-url,
// rules test with an empty cache installs PostgreSQL and nothing else. The
// times are printed for docs/ci.md; none is asserted.
func TestCIRecipes(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	service, err := sandbox.Start(ctx, sandbox.Options{PostgresOnly: true, Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer service.Close()
	databaseURL := service.BusinessDSN
	bin := idemhookBinary(t)
	realCache, err := sandbox.CacheDir()
	if err != nil {
		t.Fatal(err)
	}

	github, gitlab := ciCommands(t, "../docs/ci/github-actions.yml"), ciCommands(t, "../docs/ci/gitlab-ci.yml")
	if len(github) != 2 || !slices.Equal(github, gitlab) {
		t.Fatalf("the CI files run\n%v\n%v\nwant the same rules test and verify in both", github, gitlab)
	}
	before := databases(t, databaseURL)
	var timings []string
	for _, cmdline := range github {
		project := copyDir(t, "../docs/ci/example")
		cache := cacheDir(t)
		verifying := strings.HasPrefix(cmdline, "idemhook verify")
		if verifying {
			// What a job's cache restores: Node and n8n, no PostgreSQL.
			entries, _ := os.ReadDir(realCache)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), "node-"+sandbox.NodeMajor+"-") || strings.HasPrefix(e.Name(), "n8n-"+sandbox.N8NVersion+"-") {
					if err := os.Symlink(filepath.Join(realCache, e.Name()), filepath.Join(cache, e.Name())); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		took, out := runCI(t, project, cmdline, bin, cache, databaseURL)
		report := "reports/rules.xml"
		if verifying {
			report = "reports/verify.xml"
		}
		if junit, err := os.ReadFile(filepath.Join(project, report)); err != nil || !bytes.Contains(junit, []byte(`failures="0"`)) {
			t.Errorf("%s: the report %s: %v\n%s", cmdline, report, err, junit)
		}
		entries, _ := os.ReadDir(cache)
		for _, e := range entries {
			if !verifying || strings.HasPrefix(e.Name(), "postgres-") {
				t.Errorf("%s installed %s\n%s", cmdline, e.Name(), out)
			}
		}
		if after := databases(t, databaseURL); !slices.Equal(before, after) {
			t.Errorf("%s left the server with databases %v, it had %v", cmdline, after, before)
		}
		what := "rules test --database-url, empty cache"
		if verifying {
			what = "verify --database-url, cache with Node and n8n only"
		}
		timings = append(timings, fmt.Sprintf("%s: %.1f s", what, took.Seconds()))
	}

	// rules test on a machine with nothing: PostgreSQL alone is installed.
	project := copyDir(t, "../docs/ci/example")
	cache := cacheDir(t)
	took, out := runCI(t, project, "idemhook rules test --rules effects.yaml --schema tables.sql samples/", bin, cache, "")
	entries, _ := os.ReadDir(cache)
	var installed []string
	for _, e := range entries {
		if e.IsDir() {
			installed = append(installed, e.Name())
		}
	}
	if len(installed) != 1 || !strings.HasPrefix(installed[0], "postgres-") || !strings.Contains(out, "installing PostgreSQL") {
		t.Errorf("rules test with an empty cache installed %v, want PostgreSQL alone\n%s", installed, out)
	}
	timings = append(timings, fmt.Sprintf("rules test, empty cache, no --database-url: %.1f s", took.Seconds()))
	t.Logf("CI recipes (docs/ci.md): %s", strings.Join(timings, "; "))
	if os.Geteuid() != 0 {
		t.Log("not root: PostgreSQL runs as this user, who reaches any cache folder; the cases of root's 0700 folders do not arise")
		return
	}
	// As root, PostgreSQL runs as another user: the job's 0700 cache folder
	// was opened to it (search only), and said so.
	if fi, err := os.Stat(cache); err != nil || fi.Mode().Perm() != 0o701 || !strings.Contains(out, "let it enter "+cache) {
		t.Errorf("the 0700 cache folder: %v %v, want 0701 and a line saying so\n%s", fi.Mode().Perm(), err, out)
	}
	// A cache folder inside a folder that is not idemhook's, which that user
	// cannot enter: one line naming the folder, the user and the fix, exit
	// 2, nothing installed.
	closed := cacheDir(t)
	inside := filepath.Join(closed, "idemhook-cache")
	if err := os.Mkdir(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "rules", "test", "--rules", "effects.yaml", "--schema", "tables.sql", "samples/")
	cmd.Dir = project
	cmd.Env = append(os.Environ(), "IDEMHOOK_CACHE_DIR="+inside, "DATABASE_URL=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	last := strings.TrimSpace(stderr.String())
	if i := strings.LastIndexByte(last, '\n'); i >= 0 {
		last = last[i+1:]
	}
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.HasPrefix(last, "idemhook rules test: PostgreSQL runs as user ") ||
		!strings.Contains(last, "cannot enter "+closed+" ") || !strings.Contains(last, "chmod o+x "+closed) {
		t.Errorf("a cache inside %s (0700): exit %d (%v), want 2 and one line naming the folder, the user and the fix:\n%s", closed, code, err, stderr.String())
	}
	if entries, _ := os.ReadDir(inside); len(entries) != 0 {
		t.Errorf("it installed into the cache it cannot use: %v", entries)
	}
}

// runCI runs one command of a CI file in project, idemhook on PATH, with its
// own cache and DATABASE_URL.
func runCI(t *testing.T, project, cmdline, bin, cache, databaseURL string) (time.Duration, string) {
	t.Helper()
	cmd := exec.Command("bash", "-c", cmdline)
	cmd.Dir = project
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"IDEMHOOK_CACHE_DIR="+cache, "DATABASE_URL="+databaseURL)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmdline, err, out.String())
	}
	return took, out.String()
}

// cacheDir is an empty cache folder as a CI job makes it with mktemp -d:
// 0700, its user's alone (root's, in a container), whom PostgreSQL does not
// run as.
func cacheDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "idemhook-ci-cache-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func databases(t *testing.T, databaseURL string) []string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, _ := conn.Query(context.Background(), "SELECT datname FROM pg_database ORDER BY 1")
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// copyDir copies a folder of files (and folders) into a new temporary one.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// --database-url's mistakes, through the CLI: each is one line saying
// which, exit 2, and nothing is left on the server; a run that fails, and
// one interrupted by SIGTERM (rules test during its schema, verify while n8n
// starts), drop their scratch databases; --keep leaves it and names it.
func TestDatabaseURLBadInput(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	service, err := sandbox.Start(ctx, sandbox.Options{PostgresOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer service.Close()
	admin := service.BusinessDSN
	execOn(t, admin, `CREATE ROLE ci_no_rights LOGIN PASSWORD 'pw-nr'`)
	bin := idemhookBinary(t)
	inventory := func() []string {
		names := databases(t, admin)
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		rows, _ := conn.Query(ctx, "SELECT 'schema ' || nspname FROM pg_namespace ORDER BY 1")
		schemas, _ := pgx.CollectRows(rows, pgx.RowTo[string])
		return append(names, schemas...)
	}
	before := inventory()
	// asUser is dsn with another user, password and (when not "")
	// database: the URL parsed, so that it holds whatever the stack's own
	// password is.
	asUser := func(dsn, user, password, database string) string {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(user, password)
		if database != "" {
			u.Path = "/" + database
		}
		return u.String()
	}
	with := func(user, password, database string) string { return asUser(admin, user, password, database) }
	adminURL, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	adminPassword, _ := adminURL.User.Password()
	// A server that takes TLS connections only, beside it.
	tlsOnly, err := sandbox.Start(ctx, sandbox.Options{PostgresOnly: true, PostgresTLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tlsOnly.Close()
	execOn(t, tlsOnly.BusinessDSN, `CREATE ROLE ci LOGIN CREATEDB PASSWORD 'pw-ci'`)
	tlsBefore := databases(t, tlsOnly.BusinessDSN)
	project := copyDir(t, "../docs/ci/example")
	for _, c := range []struct {
		name, url, says, verifySays string
	}{
		{"wrong password", with("postgres", "wrong-pw", "idemhook"), "password authentication failed for user postgres", ""},
		{"no such database", with("postgres", adminPassword, "nope"), "has no database nope", ""},
		{"no rights", with("ci_no_rights", "pw-nr", "idemhook"), "may create neither a database", "may not create databases"},
		{"TLS the server does not offer", strings.Replace(admin, "sslmode=disable", "sslmode=require", 1), "does not offer TLS", ""},
		{"TLS required", asUser(tlsOnly.BusinessDSN, "ci", "pw-ci", ""), "requires TLS: add sslmode=require", ""},
	} {
		for _, args := range [][]string{
			{"rules", "test", "--rules", "effects.yaml", "--schema", "tables.sql", "--database-url", c.url, "samples/"},
			{"verify", "--workflow", "workflows/orders.json", "--database-url", c.url},
		} {
			if args[0] == "verify" && c.verifySays != "" {
				c.says = c.verifySays
			}
			t.Run(c.name+"/"+args[0], func(t *testing.T) {
				cmd := exec.Command(bin, args...)
				cmd.Dir = project
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				err := cmd.Run()
				code := -1
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				}
				lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
				if code != 2 || !strings.Contains(lines[0], c.says) || len(lines) != 1 || !strings.HasSuffix(lines[0], "; nothing was created") || strings.Contains(stderr.String(), "wrong-pw") {
					t.Errorf("exit %d, stderr:\n%s\nwant 2 and one line saying %q", code, stderr.String(), c.says)
				}
				if after := inventory(); !slices.Equal(before, after) {
					t.Errorf("the server has %v after, %v before", after, before)
				}
				if after := databases(t, tlsOnly.BusinessDSN); !slices.Equal(tlsBefore, after) {
					t.Errorf("the TLS server has %v after, %v before", after, tlsBefore)
				}
			})
		}
	}

	t.Run("a failing sample", func(t *testing.T) {
		failing := copyDir(t, "../docs/ci/example")
		sample := filepath.Join(failing, "samples", "04-wrong-amount.yaml")
		b, _ := os.ReadFile(sample)
		os.WriteFile(sample, bytes.Replace(b, []byte("amount_mismatch"), []byte("applied"), 1), 0o644)
		cmd := exec.Command(bin, "rules", "test", "--rules", "effects.yaml", "--schema", "tables.sql", "--database-url", admin, "samples/")
		cmd.Dir = failing
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "decided otherwise") {
			t.Errorf("a failing sample: %v\n%s", err, out)
		}
		if after := inventory(); !slices.Equal(before, after) {
			t.Errorf("the server has %v after a failing run, %v before", after, before)
		}
	})

	t.Run("SIGTERM", func(t *testing.T) {
		slow := copyDir(t, "../docs/ci/example")
		os.WriteFile(filepath.Join(slow, "slow.sql"), []byte("SELECT pg_sleep(60);\n"), 0o644)
		for _, c := range []struct {
			args  []string
			ready string // in stderr when the scratch database is in use
		}{
			{[]string{"rules", "test", "--rules", "effects.yaml", "--schema", "slow.sql", "--database-url", admin, "samples/"}, "running in scratch database"},
			{[]string{"verify", "--workflow", "workflows/orders.json", "--database-url", admin}, "starting n8n"},
		} {
			cmd := exec.Command(bin, c.args...)
			cmd.Dir = slow
			var stderr syncBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 2*time.Minute, c.args[0]+" using its scratch database", func() bool {
				return strings.Contains(stderr.String(), c.ready) && !slices.Equal(databases(t, admin), databases0(before))
			})
			time.Sleep(time.Second)
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
			if after := inventory(); !slices.Equal(before, after) {
				t.Errorf("%s interrupted: the server has %v after, %v before\n%s", c.args[0], after, before, stderr.String())
			}
		}
	})

	t.Run("--keep", func(t *testing.T) {
		cmd := exec.Command(bin, "rules", "test", "--rules", "effects.yaml", "--schema", "tables.sql", "--database-url", admin, "--keep", "samples/")
		cmd.Dir = project
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		after := databases(t, admin)
		var kept []string
		for _, d := range after {
			if !slices.Contains(before, d) {
				kept = append(kept, d)
			}
		}
		if len(kept) != 1 || !strings.Contains(string(out), "kept scratch database "+kept[0]) {
			t.Fatalf("--keep left %v and said:\n%s", kept, out)
		}
		execOn(t, admin, "DROP DATABASE "+kept[0])
	})
}

// syncBuffer is a buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// databases0 is the databases of an inventory.
func databases0(inventory []string) []string {
	var out []string
	for _, s := range inventory {
		if !strings.HasPrefix(s, "schema ") {
			out = append(out, s)
		}
	}
	return out
}

func execOn(t *testing.T, url, sql string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
