package e2e

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
)

// The package's tests run in two processes side by side, since they wait
// far more than they compute: the tests that start stacks of their own
// (ownStackTests: queue mode, the crashes mid-load, deploy on an empty n8n,
// PostgreSQL 17) in one, everything on the package's shared stack in the
// other. TestMain starts both as copies of this test binary, with the same
// flags and IDEMHOOK_E2E_PART set, relays their output line by line with
// the part's name in front, and fails when either fails. A test of the
// other part skips itself in each, and runs in the other.
// IDEMHOOK_E2E_PART=all runs everything in one process.
const (
	partEnv    = "IDEMHOOK_E2E_PART"
	partOwn    = "own-stacks"
	partShared = "shared-stack"
	partAll    = "all"
)

var ownStackTests = []string{"TestQueueMode", "TestCrashesMidLoad", "TestDeployThroughTheAPI", "TestPostgres17", "TestGuardBinaryModes", "TestCIRecipes", "TestDatabaseURLBadInput"}

func part() string { return os.Getenv(partEnv) }

// runParts runs the two parts and returns the exit code of the run.
func runParts() int {
	var out sync.Mutex // guards the output and failures
	var failures []string
	codes := make(chan int, 2)
	for _, p := range []string{partOwn, partShared} {
		cmd := exec.Command(os.Args[0], os.Args[1:]...)
		cmd.Env = append(os.Environ(), partEnv+"="+p)
		// A part outlives no parent: go test's timeout kills this process.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		r, w := io.Pipe()
		cmd.Stdout, cmd.Stderr = w, w
		if err := cmd.Start(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: start the %s part: %v\n", p, err)
			return 1
		}
		done := make(chan struct{})
		go func() {
			lines := bufio.NewScanner(r)
			lines.Buffer(make([]byte, 64<<10), 4<<20)
			var failure failureLines
			for lines.Scan() {
				out.Lock()
				fmt.Printf("[%s] %s\n", p, lines.Text())
				if failure.keep(lines.Text()) {
					failures = append(failures, "["+p+"] "+lines.Text())
				}
				out.Unlock()
			}
			close(done)
		}()
		go func() {
			err := cmd.Wait()
			w.Close()
			<-done
			code := 0
			if err != nil {
				code = 1
				out.Lock()
				fmt.Printf("e2e: the %s part failed: %v\n", p, err)
				out.Unlock()
			}
			codes <- code
		}()
	}
	code := <-codes | <-codes
	if code == 0 {
		fmt.Println("e2e: both parts passed")
	}
	// A CI log is often read from its end: name what failed there again.
	if len(failures) > 0 {
		fmt.Println("e2e: the failures above, again:")
		for _, l := range failures {
			fmt.Println(l)
		}
	}
	return code
}

// failureLines picks a test's failure out of go test's output: each
// "--- FAIL" line and up to maxFailureLines of the indented log under it.
type failureLines struct{ left int }

const maxFailureLines = 20

func (f *failureLines) keep(line string) bool {
	switch {
	case strings.Contains(line, "--- FAIL"), strings.HasPrefix(line, "panic:"):
		f.left = maxFailureLines
		return true
	case f.left > 0 && strings.HasPrefix(line, "    "):
		f.left--
		return true
	}
	f.left = 0
	return false
}
