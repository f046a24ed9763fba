package keysvc

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// A call alone is run at once; calls that arrive while a batch runs go
// together in the next one; a failed batch fails each of its callers; a
// caller that leaves does not hold the others back.
func TestCoalescer(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var batches [][]string
	fail := false
	c := newCoalescer(1, 100, func(_ context.Context, reqs []string) ([]string, error) {
		mu.Lock()
		batches = append(batches, append([]string(nil), reqs...))
		f := fail
		mu.Unlock()
		if reqs[0] == "hold" {
			<-release
		}
		if f {
			return nil, errors.New("database down")
		}
		out := make([]string, len(reqs))
		for i, r := range reqs {
			out[i] = "done:" + r
		}
		return out, nil
	})
	defer c.close()

	start := time.Now()
	if got, err := c.do(context.Background(), "alone"); err != nil || got != "done:alone" {
		t.Fatalf("a call alone: %q %v", got, err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("a call alone took %s: it must not wait for a batch to fill", d)
	}

	// While "hold" runs, ten callers queue up; one of them leaves early.
	held := make(chan string, 1)
	go func() { r, _ := c.do(context.Background(), "hold"); held <- r }()
	for len(snapshot(&mu, &batches)) < 2 {
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	results := make([]string, 10)
	leaving, leave := context.WithCancel(context.Background())
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			if i == 3 {
				ctx = leaving
			}
			r, err := c.do(ctx, string(rune('a'+i)))
			if err != nil {
				r = err.Error()
			}
			results[i] = r
		}()
	}
	time.Sleep(50 * time.Millisecond)
	leave()
	time.Sleep(10 * time.Millisecond)
	close(release)
	wg.Wait()
	if r := <-held; r != "done:hold" {
		t.Errorf("held call: %q", r)
	}
	b := snapshot(&mu, &batches)
	if len(b) != 3 || len(b[2]) != 9 {
		t.Errorf("batches %q: want the nine callers still waiting in one batch after the held one", b)
	}
	for i, r := range results {
		want := "done:" + string(rune('a'+i))
		if i == 3 {
			want = context.Canceled.Error()
		}
		if r != want {
			t.Errorf("caller %d got %q, want %q", i, r, want)
		}
	}

	mu.Lock()
	fail = true
	mu.Unlock()
	if _, err := c.do(context.Background(), "x"); err == nil || err.Error() != "database down" {
		t.Errorf("a failed batch answered %v", err)
	}
}

func snapshot(mu *sync.Mutex, b *[][]string) [][]string {
	mu.Lock()
	defer mu.Unlock()
	return append([][]string(nil), *b...)
}

func TestFirstOf(t *testing.T) {
	unique, first := firstOf([]string{"a", "b", "a", "c", "b"})
	if len(unique) != 3 || unique[0] != "a" || unique[1] != "b" || unique[2] != "c" {
		t.Errorf("unique %q", unique)
	}
	if want := []int{0, 1, 0, 2, 1}; len(first) != 5 || first[2] != want[2] || first[4] != want[4] || first[3] != want[3] {
		t.Errorf("first %v, want %v", first, want)
	}
}

// A call after Close answers at once with an error, never hangs.
func TestCoalescerClosed(t *testing.T) {
	c := newCoalescer(2, 10, func(_ context.Context, reqs []int) ([]int, error) { return reqs, nil })
	c.close()
	done := make(chan error, 1)
	go func() { _, err := c.do(context.Background(), 1); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, errStopped) {
			t.Errorf("after close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a call after close hangs")
	}
}
