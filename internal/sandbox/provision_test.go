package sandbox

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// Two provisioners of one cache exclude each other: the second waits (and
// says so) until the first releases the lock.
func TestProvisionLockExcludes(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockDir(context.Background(), dir, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if _, err := lockDir(ctx, dir, &progress); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lock while the first is held: %v, want it to wait until the deadline", err)
	}
	if !strings.Contains(progress.String(), "waiting for another process") {
		t.Errorf("the waiting provisioner said %q", progress.String())
	}
	unlock()
	again, err := lockDir(context.Background(), dir, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again()
}
