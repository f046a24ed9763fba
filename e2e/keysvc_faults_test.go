package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// keysvc killed with SIGKILL twice mid-load, on PostgreSQL and on the
// embedded store: every key answered 201 is there after the restarts, and
// no key is answered 201 twice. The client retries what got no answer, as a
// provider does.
func TestKeysvcKilledMidLoad(t *testing.T) {
	needStack(t)
	for _, store := range []string{"postgres", "embedded"} {
		t.Run(store, func(t *testing.T) {
			args := []string{"--table", "kf_" + store + "_events", "--create-schema"}
			var env []string
			if store == "embedded" {
				args = append(args, "--db-file", filepath.Join(t.TempDir(), "keysvc.db"))
				env = []string{"DATABASE_URL="}
			}
			k := launchKeysvc(t, "faults-"+store, args, env)
			const keys = 2000
			created := make([]atomic.Int32, keys)
			var answered, retried atomic.Int64
			jobs := make(chan int, 2*keys)
			for i := range keys {
				jobs <- i
				jobs <- i
			}
			close(jobs)
			client := &http.Client{Timeout: 10 * time.Second}
			var wg sync.WaitGroup
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range jobs {
						for attempt := 0; ; attempt++ {
							req, _ := http.NewRequest("POST", k.url+"/v1/reservations", strings.NewReader("x"))
							req.Header.Set("Idempotency-Key", fmt.Sprintf("kf-%d", i))
							resp, err := client.Do(req)
							if err == nil {
								resp.Body.Close()
							}
							if err == nil && (resp.StatusCode == 201 || resp.StatusCode == 200) {
								if resp.StatusCode == 201 {
									created[i].Add(1)
								}
								answered.Add(1)
								break
							}
							if attempt > 200 {
								t.Errorf("kf-%d never answered", i)
								return
							}
							retried.Add(1)
							time.Sleep(50 * time.Millisecond)
						}
					}
				}()
			}
			for _, at := range []int64{1000, 2500} {
				for answered.Load() < at {
					time.Sleep(5 * time.Millisecond)
				}
				k.kill()
				time.Sleep(500 * time.Millisecond)
				k.start()
			}
			wg.Wait()
			twice, missing, reserved := 0, 0, 0
			for i := range keys {
				n := created[i].Load()
				if n > 1 {
					twice++
				}
				if n == 1 {
					reserved++
				}
				// Every key was acknowledged (201, or 200 when its first
				// answer was lost with the process): all must be there.
				resp, err := http.Get(fmt.Sprintf("%s/v1/reservations/kf-%d", k.url, i))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					missing++
				}
			}
			t.Logf("%s: %d deliveries of %d keys, %d retried after the kills; %d keys answered 201 once (the others' 201 was lost with the process), %d twice, %d missing after the restarts",
				store, 2*keys, keys, retried.Load(), reserved, twice, missing)
			if twice != 0 || missing != 0 {
				t.Errorf("%d keys answered 201 twice, %d acknowledged and lost", twice, missing)
			}
		})
	}
}
