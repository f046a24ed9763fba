package history

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// Effects counts, per key, the business steps that ran to their effect
// (a client told "new" or "acquired" whose step did not fail) and the
// completions keysvc acknowledged. It checks what Jepsen's checkers check
// of a unique insert: at most one effect per key, and every acknowledged
// completion still there at the end, after every restart. It counts the
// test's own record of each effect, in memory: effects outside keysvc (an
// n8n workflow's business row) are not what it sees.
type Effects struct {
	mu        sync.Mutex
	effects   map[string]int
	completes map[string]bool
}

// NewEffects is an empty count.
func NewEffects() *Effects {
	return &Effects{effects: map[string]int{}, completes: map[string]bool{}}
}

func (fx *Effects) effect(key string) {
	fx.mu.Lock()
	fx.effects[key]++
	fx.mu.Unlock()
}

func (fx *Effects) completed(key string) {
	fx.mu.Lock()
	fx.completes[key] = true
	fx.mu.Unlock()
}

// EffectReport is what Verify found.
type EffectReport struct {
	Keys      int // keys with an effect
	Completed int // keys whose completion keysvc acknowledged
	Anomalies []string
}

// Verify looks up every key with an effect, through the clients (each
// looks up its share, at once), after the faults ended (each lookup is
// recorded, so the model checks it too), and reports a key whose step ran
// twice, or whose acknowledged completion is not done any more. Each
// lookup is tried until it is answered or ctx ends.
func (fx *Effects) Verify(ctx context.Context, clients ...*Client) EffectReport {
	fx.mu.Lock()
	keys := make([]string, 0, len(fx.effects))
	for k := range fx.effects {
		keys = append(keys, k)
	}
	effects, completes := maps.Clone(fx.effects), maps.Clone(fx.completes)
	fx.mu.Unlock()
	slices.Sort(keys)
	rep := EffectReport{Keys: len(keys)}
	var mu sync.Mutex
	note := func(s string) {
		mu.Lock()
		rep.Anomalies = append(rep.Anomalies, s)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			for j := i; j < len(keys); j += len(clients) {
				key := keys[j]
				if n := effects[key]; n > 1 {
					note(fmt.Sprintf("%s: the step ran to its effect %d times", key, n))
				}
				if !completes[key] {
					continue
				}
				switch out := c.lookupKey(ctx, key); {
				case out.Answer == Unknown:
					note(fmt.Sprintf("%s: completed, and no lookup was answered after the faults", key))
				case out.Answer != OK || out.State != StateDone:
					note(fmt.Sprintf("%s: its completion was acknowledged, and it is now %s %s", key, out.Answer, out.State))
				}
			}
		})
	}
	wg.Wait()
	for _, done := range completes {
		if done {
			rep.Completed++
		}
	}
	slices.Sort(rep.Anomalies)
	return rep
}

// lookupKey looks key up (an event key) until it is answered.
func (c *Client) lookupKey(ctx context.Context, key string) Output {
	id := key[len(EventKey("")):]
	for {
		out := c.Lookup(ctx, id)
		if out.Answer != Unknown || ctx.Err() != nil {
			return out
		}
		sleep(ctx, 200*time.Millisecond)
	}
}
