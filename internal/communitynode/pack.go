package communitynode

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ErrNoSource is returned by SourceRoot where no clone of idemhook holds
// the packages' source (an installed idemhook binary): a package is then
// given as a tarball, packed elsewhere or downloaded from npm.
var ErrNoSource = errors.New("the n8n-nodes-idemhook packages' source is not here: run from a clone of idemhook, or give the packed package (npm pack's .tgz)")

const modulePath = "github.com/idemhook/idemhook"

// SourceRoot returns the root of the idemhook module that holds dir (or a
// folder above it) and the packages' source, or ErrNoSource.
func SourceRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(mod, []byte("module "+modulePath+"\n")) {
			for _, p := range Packages {
				if _, err := os.Stat(filepath.Join(dir, p.SourceDir(), "package.json")); err != nil {
					return "", ErrNoSource
				}
			}
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoSource
		}
		dir = parent
	}
}

// packInputs are what a build reads, relative to the package's folder: a
// change to any of them makes Pack build again. The self-hosted package
// compiles the verifiable one's guard folder too (a symbolic link in its
// nodes folder, which the walk does not follow).
func packInputs(p Package) []string {
	in := []string{"package.json", "package-lock.json", "tsconfig.json", "eslint.config.mjs", "README.md", "LICENSE.md", "nodes"}
	if p == Keysvc {
		return append(in, "credentials")
	}
	return append(in, filepath.Join("..", Keysvc.SourceDir(), "nodes", "IdempotencyGuard", "guard"))
}

// Pack builds the package from its source in the module at root (npm ci
// when its dependencies changed, n8n-node build, npm pack) and returns the
// tarball, kept in outDir under a name that is the hash of the sources: a
// second call with unchanged sources returns the same file without
// building. nodeBin is the folder of the Node that npm runs under. Pack
// writes node_modules and dist in the package's folder (both ignored by
// git); the caller keeps two Packs of one folder from running at once.
func Pack(ctx context.Context, p Package, root, outDir, nodeBin string, progress io.Writer) (string, error) {
	src := filepath.Join(root, p.SourceDir())
	sum, err := hashInputs(src, packInputs(p))
	if err != nil {
		return "", fmt.Errorf("read the package's source: %w", err)
	}
	tarball := filepath.Join(outDir, p.Name+"-"+sum[:16]+".tgz")
	if _, err := os.Stat(tarball); err == nil {
		return tarball, nil
	}
	run := func(args ...string) error {
		cmd := npmCommand(ctx, nodeBin, args...)
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("npm %s in %s: %w\n%s", strings.Join(args, " "), src, err, lastBytes(out, 3000))
		}
		return nil
	}
	start := time.Now()
	fmt.Fprintf(progress, "communitynode: building %s from %s\n", p.Name, src)
	// node_modules records the lock file it was installed from.
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		return "", err
	}
	stamp := filepath.Join(src, "node_modules", ".idemhook-lock-sha256")
	lockSum := fmt.Sprintf("%x", sha256.Sum256(lock))
	if have, err := os.ReadFile(stamp); err != nil || string(have) != lockSum {
		// --ignore-scripts: @n8n/node-cli's toolchain asks for none, and
		// one of its packages runs `only-allow pnpm`, which fails offline.
		if err := run("ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"); err != nil {
			return "", err
		}
		if err := os.WriteFile(stamp, []byte(lockSum), 0o644); err != nil {
			return "", err
		}
	}
	if err := run("run", "build"); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(outDir, ".pack-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := run("pack", "--loglevel=error", "--pack-destination", tmp); err != nil {
		return "", err
	}
	packed, err := filepath.Glob(filepath.Join(tmp, p.Name+"-*.tgz"))
	if err != nil || len(packed) != 1 {
		return "", fmt.Errorf("npm pack in %s wrote %v", src, packed)
	}
	if err := os.Rename(packed[0], tarball); err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "communitynode: packed %s in %s\n", filepath.Base(tarball), time.Since(start).Round(100*time.Millisecond))
	return tarball, nil
}

func hashInputs(src string, inputs []string) (string, error) {
	h := sha256.New()
	for _, in := range inputs {
		root := filepath.Join(src, in)
		var files []string
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
		slices.Sort(files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return "", err
			}
			rel, _ := filepath.Rel(src, f)
			fmt.Fprintf(h, "%s %d\n", rel, len(b))
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Install installs packed packages into the n8n whose user folder
// (N8N_USER_FOLDER) is userFolder, as n8n installs a community package:
// into .n8n/nodes/node_modules, with their dependencies (the self-hosted
// package's pg) and without n8n-workflow, their peer, which n8n provides.
// n8n loads them at its next start, as Type; queue-mode workers sharing the
// folder load them too. It needs the npm registry (or npm's cache) for pg.
func Install(ctx context.Context, nodeBin, userFolder string, tarballs ...string) error {
	dir := filepath.Join(userFolder, ".n8n", "nodes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	manifest := filepath.Join(dir, "package.json")
	if _, err := os.Stat(manifest); errors.Is(err, fs.ErrNotExist) {
		if err := os.WriteFile(manifest, []byte(`{"name": "installed-nodes", "private": true}`+"\n"), 0o644); err != nil {
			return err
		}
	}
	// --legacy-peer-deps: npm would otherwise install n8n-workflow, the
	// peer, from the registry. --ignore-scripts: as n8n installs packages.
	cmd := npmCommand(ctx, nodeBin, append([]string{"install", "--no-audit", "--no-fund", "--loglevel=error",
		"--legacy-peer-deps", "--ignore-scripts"}, tarballs...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("install %v into %s: %w\n%s", tarballs, dir, err, lastBytes(out, 3000))
	}
	return nil
}

// InstallCustom unpacks the packed package into dir/<its name> and
// installs its dependencies there, as n8n installs a package (npm pack's
// contents, then npm install inside them), and returns that folder: put it
// in N8N_CUSTOM_EXTENSIONS and n8n loads the node as CustomType.
func InstallCustom(ctx context.Context, p Package, nodeBin, dir, tarball string) (string, error) {
	folder := filepath.Join(dir, p.Name)
	if err := os.MkdirAll(folder, 0o755); err != nil {
		return "", err
	}
	if out, err := exec.CommandContext(ctx, "tar", "-xzf", tarball, "-C", folder, "--strip-components=1").CombinedOutput(); err != nil {
		return "", fmt.Errorf("unpack %s: %w: %s", tarball, err, out)
	}
	cmd := npmCommand(ctx, nodeBin, "install", "--omit=dev", "--no-audit", "--no-fund", "--loglevel=error",
		"--legacy-peer-deps", "--ignore-scripts", "--no-package-lock")
	cmd.Dir = folder
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("install the dependencies of %s in %s: %w\n%s", p.Name, folder, err, lastBytes(out, 3000))
	}
	return folder, nil
}

// npmCommand runs npm (the one on PATH) under the Node in nodeBin, put
// first on its PATH ("" keeps PATH as it is): npm starts with
// "#!/usr/bin/env node".
func npmCommand(ctx context.Context, nodeBin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "npm", args...)
	if nodeBin != "" {
		cmd.Env = append(os.Environ(), "PATH="+nodeBin+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	return cmd
}

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
