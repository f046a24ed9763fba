package e2e

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/conformance"
	"github.com/idemhook/idemhook/internal/bench"
	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/n8napi"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/idemhook/idemhook/internal/sandbox"
)

// The Idempotency Guard community node (n8n-nodes-idemhook), installed into
// every n8n of these tests from its packed tarball as n8n installs a
// community package (package stack), in the workflow `idemhook generate
// --hashing node` writes.
func TestCommunityNode(t *testing.T) {
	needStack(t)
	t.Run("seed run", func(t *testing.T) { testSeedRun(t, seedOptions("cn1", generator.HashingNode)) })
	t.Run("body without id", func(t *testing.T) { testBodyWithoutID(t, seedOptions("cn2", generator.HashingNode)) })
	t.Run("32 concurrent deliveries", func(t *testing.T) {
		opts := seedOptions("cn3", generator.HashingNode)
		testConcurrentOnce(t, deploy(t, opts), opts.BusinessTable, "evt_cn_concurrent", 32)
	})
	t.Run("business failure", func(t *testing.T) { testBusinessFailure(t, seedOptions("cn4", generator.HashingNode)) })
	t.Run("lease", func(t *testing.T) { testLeaseGuard(t, "cn5", seedOptions("cn5", generator.HashingNode)) })
	t.Run("empty body", func(t *testing.T) {
		opts := seedOptions("cn6", generator.HashingNode)
		d := deploy(t, opts)
		r := post(t, d.url, "application/json", nil, nil)
		if r.status != 400 || !strings.Contains(r.body, "empty body") {
			t.Errorf("empty body: %d %s, want 400 empty body", r.status, r.body)
		}
		if n := countRows(t, opts.EventsTable) + countRows(t, opts.BusinessTable); n != 0 {
			t.Errorf("an empty body left %d rows", n)
		}
	})
}

// Every conformance vector, and every preset's, gives through the node in
// real n8n the key `idemhook key` gives (package eventkey's).
func TestCommunityNodeVectors(t *testing.T) {
	needStack(t)
	testVectors(t, seedOptions("cn7", generator.HashingNode), func(conformance.Vector) bool { return true })
	testPresetVectors(t, func(_ *testing.T, i int) generator.Options {
		return seedOptions(fmt.Sprintf("cnp%d", i), generator.HashingNode)
	})
}

// A wrong credential and a missing table are answered 500, an empty body
// 400, never with the business step, and nothing is reserved. (PostgreSQL
// stopped: TestReservationWithDatabaseDown.)
func TestCommunityNodeSetupFaults(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	wrongPassword := st.PostgresCredentialData()
	wrongPassword["password"] = "not-the-password"
	const wrongCred = "Postgres (e2e wrong password)"
	if _, err := api.CreateCredential(ctx, wrongCred, "postgres", wrongPassword); err != nil {
		t.Fatal(err)
	}
	closedPort, err := sandbox.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	nobody := st.PostgresCredentialData()
	nobody["port"] = closedPort
	const nobodyCred = "Postgres (e2e nobody listening)"
	if _, err := api.CreateCredential(ctx, nobodyCred, "postgres", nobody); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name       string
		credential string
		dropTable  bool
		status     int
		detail     string // in the guard's error, in n8n's execution data
	}{
		{"wrong password", wrongCred, false, 500, `credential "` + wrongCred + `" was refused`},
		{"missing table", credentialName, true, 500, "apply idemhook's schema.sql"},
		{"nobody listening", nobodyCred, false, 503, "PostgreSQL did not answer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := seedOptions("cnf_"+strings.ReplaceAll(c.name, " ", "_"), generator.HashingNode)
			opts.CredentialName = c.credential
			d := deployOn(t, opts, st.Business)
			if c.dropTable {
				execSQL(t, "DROP TABLE "+opts.EventsTable)
			}
			r := post(t, d.url, "application/json", []byte(`{"id":"evt_cnf","type":"t"}`), nil)
			if r.status != c.status {
				t.Errorf("%s: %d %s, want %d", c.name, r.status, r.body, c.status)
			}
			if n := countRows(t, opts.BusinessTable); n != 0 {
				t.Errorf("%s: the business step ran %d times", c.name, n)
			}
			if !c.dropTable && c.credential != nobodyCred && countRows(t, opts.EventsTable) != 0 {
				t.Errorf("%s: a key was reserved", c.name)
			}
			execs, err := st.WaitExecutions(ctx, d.workflowID, 1)
			if err != nil {
				t.Fatal(err)
			}
			run, err := api.ExecutionRun(ctx, n8napi.ID(execs[0].ID))
			if err != nil {
				t.Fatal(err)
			}
			if said := guardError(run); !strings.Contains(said, c.detail) {
				t.Errorf("%s: the guard's error output says %q, want it to say %q", c.name, said, c.detail)
			}
			if run.Ran(generator.BusinessNodeName(opts.BusinessTable)) {
				t.Errorf("%s: the business step ran", c.name)
			}
		})
	}
}

// guardError is the message on the Idempotency Guard's error output (its
// last) in run, or "".
func guardError(run n8napi.Run) string {
	outs := run.JSON[generator.NodeGuard]
	if len(outs) == 0 || len(outs[len(outs)-1]) == 0 {
		return ""
	}
	msg, _ := outs[len(outs)-1][0]["error"].(string)
	return msg
}

// removeDuplicatesWorkflow is a user's workflow deduplicated with n8n's own
// Remove Duplicates node, the one the bench measures.
func removeDuplicatesWorkflow(id, path, businessTable string, historySize int) []byte {
	return bench.RemoveDuplicatesWorkflow(id, path, pgsql.MustParseTable(businessTable), credentialName, historySize)
}

// Side by side, one event delivered 20 times at once: through n8n's Remove
// Duplicates (previous executions) and through the Idempotency Guard. The
// business rows count how many deliveries each let through. Then Remove
// Duplicates with a history of 5 given a sixth event.
func TestCommunityNodeAgainstRemoveDuplicates(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	const n = 20
	opts := seedOptions("cnr", generator.HashingNode)
	guarded := deploy(t, opts)
	rdTable := "cnr_rd_business_log"
	execSQL(t, "CREATE TABLE IF NOT EXISTS "+rdTable+" (id bigserial PRIMARY KEY, event_key text NOT NULL, event_type text, created_at timestamptz NOT NULL DEFAULT now())")
	rd := deployWorkflowFile(t, "cnr-rd", removeDuplicatesWorkflow("idemhookE2eCnrRd1", "cnr-rd-hook", rdTable, 10000))

	deliverAtOnce := func(url, id string) {
		body := []byte(fmt.Sprintf(`{"id":%q,"type":"invoice.paid"}`, id))
		parallel(n, func(int) response { return postNoFatal(url, "application/json", body) })
	}
	passed := func(table, id string) int {
		var rows int
		if err := st.Business.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE event_key = $1", "evt:"+id).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	// Three rounds each, new events every time: a race may go either way
	// in one round.
	var rdPassed, guardPassed []int
	for round := range 3 {
		id := fmt.Sprintf("evt_cnr_%d", round)
		deliverAtOnce(rd, id)
		deliverAtOnce(guarded.url, id)
		rdPassed = append(rdPassed, passed(rdTable, id))
		guardPassed = append(guardPassed, passed(opts.BusinessTable, id))
	}
	t.Logf("%d concurrent deliveries of one event, 3 rounds: Remove Duplicates let %v through, the Idempotency Guard %v", n, rdPassed, guardPassed)
	for i, g := range guardPassed {
		if g != 1 {
			t.Errorf("round %d: the Idempotency Guard let %d of %d deliveries through, want 1", i, g, n)
		}
	}
	// What Remove Duplicates does is measured, not asserted: the figure goes
	// into docs/n8n-node.md. It must at least have run the step.
	for i, r := range rdPassed {
		if r < 1 {
			t.Errorf("round %d: Remove Duplicates ran no business step at all", i)
		}
	}

	// A full history: Remove Duplicates with room for 5 keys, given 8
	// distinct events one after the other.
	small := "cnr_rd5_business_log"
	execSQL(t, "CREATE TABLE IF NOT EXISTS "+small+" (id bigserial PRIMARY KEY, event_key text NOT NULL, event_type text, created_at timestamptz NOT NULL DEFAULT now())")
	rd5 := deployWorkflowFile(t, "cnr-rd5", removeDuplicatesWorkflow("idemhookE2eCnrRd5", "cnr-rd5-hook", small, 5))
	var statuses []int
	for i := range 8 {
		statuses = append(statuses, post(t, rd5, "application/json", []byte(fmt.Sprintf(`{"id":"evt_cnr_h%d"}`, i)), nil).status)
	}
	t.Logf("Remove Duplicates with historySize 5, eight distinct events: answers %v, %d business rows", statuses, countRows(t, small))
}

// deployWorkflowFile deploys a hand-made workflow through n8n's public API
// and returns its webhook URL.
func deployWorkflowFile(t *testing.T, name string, workflow []byte) string {
	t.Helper()
	claimName(t, name)
	dir := t.TempDir()
	file := filepath.Join(dir, "workflow.json")
	if err := os.WriteFile(file, workflow, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := st.Deploy(context.Background(), file); err != nil {
		t.Fatalf("deploy %s: %v", name, err)
	}
	var w struct {
		Nodes []struct{ Parameters struct{ Path string } }
	}
	if err := json.Unmarshal(workflow, &w); err != nil {
		t.Fatal(err)
	}
	return st.WebhookURL + "/webhook/" + w.Nodes[0].Parameters.Path
}

// n8n loaded both packages with no error, under their package type names
// and, from N8N_CUSTOM_EXTENSIONS, their custom ones.
func TestCommunityNodeLoaded(t *testing.T) {
	needStack(t)
	types, err := st.NodeTypeVersions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range communitynode.Types() {
		if _, ok := types[typ]; !ok {
			t.Errorf("n8n's node types do not list %s", typ)
		}
	}
	for _, log := range st.Logs() {
		b, err := os.ReadFile(log)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			l := strings.ToLower(line)
			if strings.Contains(l, "n8n-nodes-idemhook") && (strings.Contains(l, "error") || strings.Contains(l, "fail")) {
				t.Errorf("%s: %s", filepath.Base(log), line)
			}
		}
	}
}

// The node loaded from N8N_CUSTOM_EXTENSIONS is CUSTOM.<node>: the
// workflow `generate --hashing node --node-type CUSTOM.…` writes runs the
// seed's scenario there.
func TestCommunityNodeCustomType(t *testing.T) {
	needStack(t)
	opts := seedOptions("cnc", generator.HashingNode)
	opts.NodeType = communitynode.Postgres.CustomType()
	testSeedRun(t, opts)
}

// The packed packages hold what n8n's community-node layout asks for and
// nothing else, under 1 MB, built against the n8n-workflow the pinned n8n
// runs. The verifiable one has no runtime dependency and none of the
// self-hosted package's code (pg, the receipt): what n8n's scanner reads.
func TestCommunityNodePackage(t *testing.T) {
	needStack(t)
	in, err := sandbox.Provision(context.Background(), sandbox.Needs{N8N: true, CommunityNode: true}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.CommunityNodes) != len(communitynode.Packages) {
		t.Fatalf("packed %v", in.CommunityNodes)
	}
	var runs struct{ Version string }
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(in.N8N)), "n8n-workflow", "package.json"))
	if err != nil || json.Unmarshal(raw, &runs) != nil {
		t.Fatalf("read n8n's n8n-workflow: %v", err)
	}
	for i, p := range communitynode.Packages {
		files := packedFiles(t, in.CommunityNodes[i])
		var names []string
		for name := range files {
			names = append(names, name)
			if !strings.HasPrefix(name, "dist/") && !slices.Contains([]string{"package.json", "README.md", "LICENSE.md"}, name) {
				t.Errorf("%s holds %s: only dist/, README, LICENSE and package.json belong in it", p.Name, name)
			}
		}
		nodeDir := "dist/nodes/IdempotencyGuard/"
		want := []string{nodeDir + "IdempotencyGuard.node.js", nodeDir + "guard/keyspec.js", "dist/credentials/IdemhookKeysvcApi.credentials.js"}
		if p == communitynode.Postgres {
			nodeDir = "dist/nodes/IdempotencyGuardPostgres/"
			want = []string{nodeDir + "IdempotencyGuardPostgres.node.js", nodeDir + "guard/keyspec.js", nodeDir + "signaturespec.js"}
		}
		for _, w := range append(want, "README.md", "LICENSE.md") {
			if _, ok := files[w]; !ok {
				t.Errorf("%s has no %s", p.Name, w)
			}
		}
		var pkg struct {
			Dependencies    map[string]string `json:"dependencies"`
			DevDependencies map[string]string `json:"devDependencies"`
		}
		if err := json.Unmarshal(files["package.json"], &pkg); err != nil {
			t.Fatalf("%s's package.json: %v", p.Name, err)
		}
		if pkg.DevDependencies["n8n-workflow"] != runs.Version {
			t.Errorf("%s is built against n8n-workflow %s, n8n %s runs %s", p.Name, pkg.DevDependencies["n8n-workflow"], sandbox.N8NVersion, runs.Version)
		}
		if p == communitynode.Keysvc {
			if len(pkg.Dependencies) != 0 {
				t.Errorf("%s has runtime dependencies %v", p.Name, pkg.Dependencies)
			}
			for name, b := range files {
				if strings.HasSuffix(name, ".js") && (strings.Contains(string(b), "require(\"pg\")") || strings.Contains(string(b), "require('pg')")) {
					t.Errorf("%s: %s requires pg", p.Name, name)
				}
			}
		}
		t.Logf("%s: %d files", filepath.Base(in.CommunityNodes[i]), len(names))
	}
}

// packedFiles reads a packed .tgz (npm pack's): its files by name, without
// the package/ folder, under 1 MB in all.
func packedFiles(t *testing.T, tarball string) map[string][]byte {
	t.Helper()
	fi, err := os.Stat(tarball)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() >= 1<<20 {
		t.Errorf("%s is %d bytes, want under 1 MB", tarball, fi.Size())
	}
	f, err := os.Open(tarball)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(h.Name, "package/")] = b
	}
}

// n8n's editor draws the generated workflow with the node, its outputs
// named (a screenshot, n8n-node.png, in the artifacts folder for the docs).
func TestCommunityNodeInTheEditor(t *testing.T) {
	needStack(t)
	d := deploy(t, seedOptions("cne", generator.HashingNode))
	shot(t, d.workflowID, "n8n-node", generator.NodeGuard, "New", "Duplicate")
}

// The install commands docs/n8n-node.md gives, run as written from the
// clone's root (for the self-hosted package, with its folder in the cd),
// with a home of their own: each package lands in ~/.n8n/nodes, where n8n
// loads community packages from, with its dependencies and without
// n8n-workflow.
func TestDocumentedTarballInstall(t *testing.T) {
	needStack(t)
	doc, err := os.ReadFile(filepath.Join("..", "docs", "n8n-node.md"))
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- TestDocumentedTarballInstall runs this block as written -->\n```sh\n"
	_, rest, ok := strings.Cut(string(doc), marker)
	block, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatalf("docs/n8n-node.md has no block after %q", marker)
	}
	in, err := sandbox.Provision(context.Background(), sandbox.Needs{N8N: true}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range communitynode.Packages {
		t.Run(p.Name, func(t *testing.T) {
			script := strings.Replace(block, "cd "+communitynode.Keysvc.SourceDir()+" ", "cd "+p.SourceDir()+" ", 1)
			if !strings.Contains(script, "cd "+p.SourceDir()+" ") {
				t.Fatalf("the block does not cd into %s:\n%s", p.SourceDir(), block)
			}
			home := t.TempDir()
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
			cmd.Dir = ".."
			cmd.Env = append(os.Environ(), "HOME="+home, "PATH="+in.NodeBin+string(os.PathListSeparator)+os.Getenv("PATH"))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("the documented commands failed: %v\n%s", err, out)
			}
			installed := filepath.Join(home, ".n8n", "nodes", "node_modules", p.Name)
			var pkg struct {
				Name string
				N8N  struct{ Nodes []string } `json:"n8n"`
			}
			raw, err := os.ReadFile(filepath.Join(installed, "package.json"))
			if err != nil || json.Unmarshal(raw, &pkg) != nil || pkg.Name != p.Name || len(pkg.N8N.Nodes) != 1 {
				t.Fatalf("%s is not installed in ~/.n8n/nodes: %v %s", p.Name, err, raw)
			}
			if _, err := os.Stat(filepath.Join(installed, pkg.N8N.Nodes[0])); err != nil {
				t.Errorf("the installed package lacks its node: %v", err)
			}
			if _, err := os.Stat(filepath.Join(home, ".n8n", "nodes", "node_modules", "n8n-workflow")); err == nil {
				t.Error("n8n-workflow was installed beside the package; n8n provides it")
			}
			if p == communitynode.Postgres {
				if _, err := os.Stat(filepath.Join(home, ".n8n", "nodes", "node_modules", "pg")); err != nil {
					t.Errorf("pg, the self-hosted package's dependency, is not installed: %v", err)
				}
			}
		})
	}
}
