package sandbox

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// NodeRED is Node-RED NodeREDVersion running as a process of its own on
// loopback, with a flows file: what keysvc's Node-RED flow is proven in.
type NodeRED struct {
	// URL is Node-RED's base URL (the editor at /, HTTP In routes under it).
	URL string
	// Dir is its user folder, which holds flows.json; Log its output.
	Dir, Log string
	// Env is added to its environment (keysvc's URL and token) by Start.
	Env       []string
	node, red string
	port      int
	cmd       *exec.Cmd
	logFile   *os.File
}

// noderedSettings is the settings.js of the Node-RED the tests run: on
// loopback, no telemetry, no tour, credentials not encrypted with a key it
// would write to disk (the flow holds none).
const noderedSettings = `module.exports = {
  uiHost: "127.0.0.1",
  flowFile: "flows.json",
  flowFilePretty: true,
  credentialSecret: false,
  telemetry: { enabled: false },
  diagnostics: { enabled: false, ui: false },
  logging: { console: { level: "info", metrics: false, audit: false } },
  functionExternalModules: true,
  editorTheme: { tours: false, projects: { enabled: false } },
};
`

// StartNodeRED installs Node-RED (and Node NodeMajor) into the cache when
// missing, and starts it with flows as its flows file and env added to its
// environment (keysvc's URL and token). It returns once the flows run.
func StartNodeRED(ctx context.Context, flows []byte, env []string, progress io.Writer) (*NodeRED, error) {
	n, err := PrepareNodeRED(ctx, flows, progress)
	if err != nil {
		return nil, err
	}
	n.Env = env
	if err := n.Start(ctx); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// PrepareNodeRED is StartNodeRED but for the start: its URL is known before
// it runs (a keysvc inbox's target), and Start runs it.
func PrepareNodeRED(ctx context.Context, flows []byte, progress io.Writer) (*NodeRED, error) {
	in, err := Provision(ctx, Needs{NodeRED: true, Why: "the Node-RED flow's tests run it"}, progress)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "idemhook-node-red-")
	if err != nil {
		return nil, err
	}
	// The editor's tips are a per-user setting: off, for screenshots.
	users := `{"_":{"editor":{"view":{"view-show-tips":false,"view-show-welcome-tours":false}}}}`
	for name, b := range map[string]string{"settings.js": noderedSettings, "flows.json": string(flows), ".config.users.json": users} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o600); err != nil {
			return nil, err
		}
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	n := &NodeRED{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Dir: dir, Log: filepath.Join(dir, "node-red.log"),
		node: filepath.Join(in.NodeBin, "node"), red: in.NodeRED, port: port}
	if n.logFile, err = os.Create(n.Log); err != nil {
		return nil, err
	}
	return n, nil
}

// Start starts Node-RED (again, after Kill) on its port and user folder,
// and waits until it has started its flows (it listens before).
func (n *NodeRED) Start(ctx context.Context) error {
	started := func() int {
		b, _ := os.ReadFile(n.Log)
		return strings.Count(string(b), "Started flows")
	}
	before := started()
	cmd := exec.Command(n.node, n.red, "--userDir", n.Dir, "--port", strconv.Itoa(n.port), filepath.Join(n.Dir, "flows.json"))
	cmd.Env = append(os.Environ(), n.Env...)
	cmd.Stdout, cmd.Stderr = n.logFile, n.logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	n.cmd = cmd
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for deadline := time.Now().Add(60 * time.Second); ; {
		if resp, err := http.Get(n.URL + "/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && started() > before {
				return nil
			}
		}
		select {
		case err := <-exited:
			n.cmd = nil
			return fmt.Errorf("Node-RED exited at start: %v (log: %s)", err, n.Log)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Node-RED did not answer on %s within 60 s (log: %s)", n.URL, n.Log)
		}
	}
}

// Kill stops Node-RED at once (SIGKILL: no drain, requests in flight cut).
func (n *NodeRED) Kill() {
	if n.cmd == nil {
		return
	}
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	for i := 0; i < 100 && syscall.Kill(n.cmd.Process.Pid, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	n.cmd = nil
}

// Close stops Node-RED; its folder stays, with the log a failed test names.
func (n *NodeRED) Close() {
	if n.cmd != nil {
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGTERM)
		time.Sleep(200 * time.Millisecond)
		n.Kill()
	}
	if n.logFile != nil {
		n.logFile.Close()
	}
}
