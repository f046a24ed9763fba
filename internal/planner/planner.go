// Package planner is the planner page: paste a delivery, see its key and the
// rule that produced it, and download the files `idemhook generate` writes,
// all in the browser. The page is static (HTML, CSS, a script and the Go key
// spec and generator compiled to WebAssembly) and makes no network request
// with what is pasted. keysvc serves it at / and /planner/; `idemhook
// planner --out DIR` writes the same bytes for any static host or for
// opening from disk.
//
// The WebAssembly module is not committed: it is built from idemhook's Go
// source with the Go toolchain the first time the page is needed (source.go
// says where that source is found), or carried in the binary by a build
// that asks for it (embed_on.go; keysvc's Docker image is built so).
package planner

import (
	"bytes"
	"compress/gzip"
	"context"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"sync"
	"time"

	"github.com/idemhook/idemhook/internal/planner/internal/wasmbuild"
)

//go:generate go run ./internal/genwasm

// web holds the page's hand-written files: index.html, planner.js and
// planner.css.
//
//go:embed web
var web embed.FS

// The two files that come with the module: wasm_exec.js from the Go
// toolchain that built it, and the module itself as a script that defines
// it in base64, because a page opened from disk may load scripts but may
// not fetch files.
const (
	wasmExec   = "wasm_exec.js"
	wasmScript = "idemhook.wasm.js"
)

// ErrNoModule is wrapped by every error that leaves the page without its
// module; the message goes on to say why and what would give it one.
var ErrNoModule = errors.New("the planner page's WebAssembly module is not in this build and could not be built")

// errNoToolchain: the module is built with the go command, not on PATH.
var errNoToolchain = errors.New("the Go toolchain (the go command) is not on PATH")

// buildTimeout bounds one build: a go command waiting on a network it
// cannot reach must not hold the page forever.
const buildTimeout = 10 * time.Minute

// Files returns the page's files by name, as `idemhook planner` writes them
// and keysvc serves them. The first call in a process may build the module
// (seconds with a warm go build cache, a minute or two with an empty one);
// progress is told when it does. A failed build is tried again by the next
// call.
func Files(progress io.Writer) (map[string][]byte, error) {
	a := begin(progress)
	<-a.done
	return a.files, a.err
}

// attempt is one assembly of the page's files, shared by every caller that
// asks while it runs and, once it succeeded, by every later one.
type attempt struct {
	done  chan struct{}
	files map[string][]byte
	err   error
}

var (
	attemptMu sync.Mutex
	last      *attempt
)

// begin returns the attempt under way or the one that succeeded, and starts
// one when there is neither.
func begin(progress io.Writer) *attempt {
	attemptMu.Lock()
	defer attemptMu.Unlock()
	if last != nil {
		select {
		case <-last.done:
			if last.err == nil {
				return last
			}
		default:
			return last
		}
	}
	a := &attempt{done: make(chan struct{})}
	last = a
	go func() {
		defer close(a.done)
		a.files, a.err = assemble(progress)
	}()
	return a
}

// assemble reads the hand-written files and adds the module's two.
func assemble(progress io.Writer) (map[string][]byte, error) {
	out := map[string][]byte{}
	entries, err := fs.ReadDir(web, "web")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if out[e.Name()], err = web.ReadFile("web/" + e.Name()); err != nil {
			return nil, err
		}
	}
	gz, execJS, err := module(progress)
	if err != nil {
		return nil, err
	}
	if out[wasmScript], err = wasmAsScript(gz); err != nil {
		return nil, err
	}
	out[wasmExec] = execJS
	for _, need := range []string{"index.html", "planner.js", "planner.css"} {
		if out[need] == nil {
			return nil, fmt.Errorf("planner: web/%s is missing", need)
		}
	}
	return out, nil
}

// module returns the gzipped module and its wasm_exec.js: the binary's own
// when it carries one, else built from the source it was built from.
func module(progress io.Writer) (gz, execJS []byte, err error) {
	if gz, execJS, ok := embedded(); ok {
		return gz, execJS, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	if _, err := exec.LookPath("go"); err != nil {
		return nil, nil, unavailable(errNoToolchain)
	}
	root, err := source(ctx)
	if err != nil {
		return nil, nil, unavailable(err)
	}
	fmt.Fprintf(progress, "planner: building the page's WebAssembly module from %s with the Go toolchain (seconds; a minute or two with an empty go build cache)\n", root)
	start := time.Now()
	m, err := wasmbuild.Build(ctx, root)
	if err != nil {
		return nil, nil, unavailable(err)
	}
	if gz, err = wasmbuild.Gzip(m.Wasm); err != nil {
		return nil, nil, unavailable(err)
	}
	fmt.Fprintf(progress, "planner: built the module with %s in %s (%d bytes gzipped)\n", m.GoVersion, time.Since(start).Round(100*time.Millisecond), len(gz))
	return gz, m.ExecJS, nil
}

// unavailable says why there is no module and what would give one.
func unavailable(cause error) error {
	remedy := "use a build that carries the module, which needs no Go toolchain where it runs: `go generate ./internal/planner`, then `go build -tags planner_embed` (keysvc's Docker image is built so)"
	if errors.Is(cause, errNoToolchain) {
		remedy = "install Go (https://go.dev/dl/) and run this again, or " + remedy
	} else {
		remedy = "or " + remedy
	}
	return fmt.Errorf("%w: %w; %s", ErrNoModule, cause, remedy)
}

// wasmAsScript turns the gzipped module into the script the page loads: the
// gzip itself in base64 (a quarter of the module's size, for the browser to
// parse), which the page decompresses as it compiles it.
func wasmAsScript(gz []byte) ([]byte, error) {
	if _, err := gzip.NewReader(bytes.NewReader(gz)); err != nil {
		return nil, fmt.Errorf("planner: the module's gzip: %w", err)
	}
	var b bytes.Buffer
	b.WriteString("// The idemhook planner's WebAssembly module (cmd/planner-wasm), gzipped, in base64.\nconst IDEMHOOK_WASM_GZIP_BASE64 = '")
	b.WriteString(base64.StdEncoding.EncodeToString(gz))
	b.WriteString("';\n")
	return b.Bytes(), nil
}
