package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
)

// modulePath is idemhook's Go module.
const modulePath = "github.com/idemhook/idemhook"

// errNoSource: neither a downloaded module nor a clone is known to hold the
// source this binary was built from.
var errNoSource = errors.New("this binary was built neither by `go install` of a released module nor in a clone it can find (-trimpath hides the clone)")

// source returns the root of the idemhook source this binary was built
// from, which the module is built from too, so that the page's files are
// the binary's own generator's:
//   - built by `go install github.com/idemhook/idemhook/cmd/...@version`
//     (the build info records the module's checksum): that module, where
//     the go command keeps it (`go mod download` fetches it again if the
//     module cache was cleaned);
//   - built in a clone (go build, go run, go test): the folder this file
//     was compiled from, as it is now.
func source(ctx context.Context) (string, error) {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Path == modulePath && bi.Main.Sum != "" {
		return downloaded(ctx, bi.Main.Path+"@"+bi.Main.Version)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		root := filepath.Dir(filepath.Dir(filepath.Dir(file))) // internal/planner/source.go
		if isModuleRoot(root) {
			return root, nil
		}
	}
	return "", errNoSource
}

// downloaded returns the folder of module@version in the module cache,
// downloading it if it is not there.
func downloaded(ctx context.Context, moduleVersion string) (string, error) {
	// In an empty folder: a go.mod around the current one is not ours.
	dir, err := os.MkdirTemp("", "idemhook-source-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", moduleVersion)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %v %s %s", moduleVersion, runErr, m.Error, strings.TrimSpace(stderr.String()))
	}
	return m.Dir, nil
}

// isModuleRoot reports whether dir holds idemhook's go.mod.
func isModuleRoot(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(first) == "module "+modulePath
}
