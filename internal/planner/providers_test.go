package planner_test

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/idemhook/idemhook/signature/provider"
)

// The page's own provider tables (web/planner.js: SCOPED, the presets that
// take a scope; SAMPLE_HEADERS, a placeholder per provider) are package
// provider's: the two declarations are cut out of the page's script,
// evaluated under node and compared with the one table.
func TestPageProviderTablesAreTheProviders(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("web", "planner.js"))
	if err != nil {
		t.Fatal(err)
	}
	var decls []string
	for _, name := range []string{"SCOPED", "SAMPLE_HEADERS"} {
		// A declaration ends with the first line that ends with ';'.
		d := regexp.MustCompile(`(?ms)^const ` + name + ` = .*?;$`).Find(page)
		if d == nil {
			t.Fatalf("web/planner.js declares no %s", name)
		}
		decls = append(decls, string(d))
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH: the page's tables cannot be read (install Node.js, see README)")
	}
	src := strings.Join(decls, "\n") + "\nprocess.stdout.write(JSON.stringify({scoped: [...SCOPED], samples: SAMPLE_HEADERS}));\n"
	out, err := exec.Command(node, "-e", src).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var got struct {
		Scoped  []string          `json:"scoped"`
		Samples map[string]string `json:"samples"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}

	var scoped []string
	for _, p := range provider.All {
		if eventkey.Preset(p.Name).Scoped() {
			scoped = append(scoped, p.Name)
		}
	}
	slices.Sort(scoped)
	slices.Sort(got.Scoped)
	if !slices.Equal(got.Scoped, scoped) {
		t.Errorf("SCOPED is %v; the presets that take a scope are %v", got.Scoped, scoped)
	}

	for name := range got.Samples {
		if _, ok := provider.Lookup(name); !ok {
			t.Errorf("SAMPLE_HEADERS names %q, which is no provider", name)
		}
	}
	for _, p := range provider.All {
		sample, ok := got.Samples[p.Name]
		if !ok {
			t.Errorf("SAMPLE_HEADERS has no sample for %s", p.Name)
			continue
		}
		// The sample shows what the preset reads (its first id header and
		// its scope header), or else a header of the signature.
		if len(p.Key.IDHeaders) == 0 {
			if !slices.ContainsFunc(p.SignatureHeaders, func(h string) bool { return sampleNames(sample, h) }) {
				t.Errorf("SAMPLE_HEADERS[%s] %q shows none of %v", p.Name, sample, p.SignatureHeaders)
			}
			continue
		}
		for _, h := range []string{p.Key.IDHeaders[0], p.Key.ScopeHeader} {
			if h != "" && !sampleNames(sample, h) {
				t.Errorf("SAMPLE_HEADERS[%s] %q does not show %s", p.Name, sample, h)
			}
		}
	}
}

// sampleNames reports whether a sample's lines (name: value) name header.
func sampleNames(sample, header string) bool {
	for _, line := range strings.Split(sample, "\n") {
		name, _, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(name), header) {
			return true
		}
	}
	return false
}

// The page's GUARD_STORES (web/planner.js: each type name of idemhook's
// community nodes and the store it reserves in, which draws the node's
// outputs and hides --node-store once --node-type names the package) is
// package communitynode's table.
func TestPageGuardTypesAreTheCommunityNodes(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("web", "planner.js"))
	if err != nil {
		t.Fatal(err)
	}
	d := regexp.MustCompile(`(?ms)^const GUARD_STORES = .*?;$`).Find(page)
	if d == nil {
		t.Fatal("web/planner.js declares no GUARD_STORES")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH: the page's tables cannot be read (install Node.js, see README)")
	}
	out, err := exec.Command(node, "-e", string(d)+"\nprocess.stdout.write(JSON.stringify(GUARD_STORES));\n").Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var got map[string]string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	want := map[string]string{}
	for _, p := range communitynode.Packages {
		want[p.Type()] = p.Store
		want[p.CustomType()] = p.Store
	}
	if !maps.Equal(got, want) {
		t.Errorf("GUARD_STORES is %v; package communitynode's types and stores are %v", got, want)
	}
}
