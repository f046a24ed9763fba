package history

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Workload is what a run's clients do against one keysvc (or one address
// in front of several). Three kinds of work are mixed:
//
//   - deliveries of events, as a provider sends them and the guard handles
//     them: reserve, or acquire a lease (half of the events each); on "new"
//     or "acquired" the step runs (its effect is counted) and the key is
//     completed, or, one time in ten, the step fails and the key is
//     released; a duplicate or done answer acknowledges the delivery; a busy
//     or unknown answer, or a failed step, has the delivery sent again
//     later. Cold events come once or twice; hot events are delivered by
//     many clients at once, HotDeliveries times, then replaced.
//   - the same events looked up after their delivery, now and then.
//   - contended keys that every client works on at random: reserve, acquire
//     with ShortLease (which expires within the run, so that leases are
//     taken over), complete, release and lookup, with no protocol at all;
//     the model alone checks them (no effect is counted).
type Workload struct {
	Clients int
	// Prefix begins every event id of the run: one per keysvc tested, so
	// that their keys differ.
	Prefix string
	// Lease is the deliveries' lease, longer than the run: a lease whose
	// answer was lost holds its key for the rest of the run.
	Lease time.Duration
	// ShortLease is the contended keys' lease.
	ShortLease time.Duration
	// HotEvents and ContendedKeys are how many of each are worked on at
	// once; HotDeliveries and ContendedOps how long each lasts.
	HotEvents, HotDeliveries    int
	ContendedKeys, ContendedOps int
	// Timeout is how long a call waits for its answer.
	Timeout time.Duration
	// Operations ends the run once the recorder holds that many (zero:
	// the run ends with ctx).
	Operations int
}

// Stats counts what a run's clients did.
type Stats struct {
	Deliveries   int64 // attempts to deliver an event
	Acknowledged int64 // deliveries answered new, acquired, duplicate or done
	Resent       int64 // deliveries sent again after busy, unknown or a failed step
	GaveUp       int64 // deliveries given up after maxResends
	// Answers counts every call's answer by kind (Unknown: none came,
	// connections refused included).
	Answers map[Answer]int64
}

// maxOpen is how many calls without an answer a hot event or contended
// key collects before it is replaced: each one left open doubles what the
// checker may have to try on that key.
const maxOpen = 6

// maxResends bounds how often one delivery is sent again: a lease whose
// answer was lost answers busy until it expires, after the run.
const maxResends = 8

// Run has w.Clients clients work on base until ctx ends, recording into
// rec and counting effects into fx. unexpected receives every answer the
// key API never gives.
func Run(ctx context.Context, base string, hc *http.Client, w Workload, rec *Recorder, fx *Effects, unexpected func(string)) Stats {
	r := &run{w: w, fx: fx, hot: make([]*rotating, w.HotEvents), contended: make([]*rotating, w.ContendedKeys)}
	for i := range r.hot {
		r.hot[i] = r.fresh("hot")
	}
	for i := range r.contended {
		r.contended[i] = r.fresh("contended")
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	if w.Operations > 0 {
		go func() {
			for ctx.Err() == nil && rec.Len() < w.Operations {
				sleep(ctx, 10*time.Millisecond)
			}
			stop()
		}()
	}
	var wg sync.WaitGroup
	clients := make([]*Client, w.Clients)
	for i := range clients {
		c := NewClient(base, hc, rec, w.Timeout, unexpected)
		clients[i] = c
		rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
		wg.Go(func() { r.client(ctx, c, rng) })
	}
	wg.Wait()
	stats := Stats{Deliveries: r.deliveries.Load(), Acknowledged: r.acked.Load(), Resent: r.resent.Load(), GaveUp: r.gaveUp.Load(), Answers: map[Answer]int64{}}
	for _, c := range clients {
		for a, n := range c.answers {
			stats.Answers[a] += n
		}
	}
	return stats
}

type run struct {
	w   Workload
	fx  *Effects
	seq atomic.Int64

	mu        sync.Mutex
	pending   []delivery // sent again once due
	hot       []*rotating
	contended []*rotating

	deliveries, acked, resent, gaveUp atomic.Int64
}

type event struct {
	id    string
	lease bool
}

type delivery struct {
	ev     event
	due    time.Time
	resent int
}

// rotating is a hot event or a contended key, replaced after its share of
// the work, or maxOpen calls without an answer, so that no key's history
// grows too long to check.
type rotating struct {
	ev         event
	used, open atomic.Int64
}

func (r *run) newEvent(kind string) event {
	n := r.seq.Add(1)
	return event{id: fmt.Sprintf("%s-%s-%d", r.w.Prefix, kind, n), lease: n%2 == 0}
}

func (r *run) fresh(kind string) *rotating { return &rotating{ev: r.newEvent(kind)} }

// take returns slot i of set, replacing it once it served limit times or
// collected maxOpen calls without an answer.
func (r *run) take(set []*rotating, i, limit int, kind string) *rotating {
	r.mu.Lock()
	defer r.mu.Unlock()
	if set[i].used.Add(1) > int64(limit) || set[i].open.Load() >= maxOpen {
		set[i] = r.fresh(kind)
		set[i].used.Add(1)
	}
	return set[i]
}

// counting runs f with c and adds the calls of f that got no answer to
// slot's.
func counting(c *Client, slot *rotating, f func()) {
	before := c.answers[Unknown]
	f()
	slot.open.Add(c.answers[Unknown] - before)
}

func (r *run) client(ctx context.Context, c *Client, rng *rand.Rand) {
	for ctx.Err() == nil {
		switch p := rng.Float64(); {
		case p < 0.15 && len(r.contended) > 0:
			slot := r.take(r.contended, rng.IntN(len(r.contended)), r.w.ContendedOps, "contended")
			counting(c, slot, func() { r.contend(ctx, c, rng, slot.ev) })
		case p < 0.45 && len(r.hot) > 0:
			slot := r.take(r.hot, rng.IntN(len(r.hot)), r.w.HotDeliveries, "hot")
			counting(c, slot, func() { r.deliver(ctx, c, rng, slot.ev) })
		default:
			d, ok := r.due()
			if !ok {
				d = delivery{ev: r.newEvent("cold")}
				if rng.IntN(10) < 4 { // the provider delivers it twice
					r.later(delivery{ev: d.ev, due: time.Now().Add(jitter(rng, 50*time.Millisecond))})
				}
			}
			if r.deliver(ctx, c, rng, d.ev) {
				r.resend(rng, d)
			}
		}
	}
}

// deliver is one delivery of ev through the guard; it says whether the
// provider sends it again.
func (r *run) deliver(ctx context.Context, c *Client, rng *rand.Rand, ev event) (again bool) {
	r.deliveries.Add(1)
	var out Output
	if ev.lease {
		out = c.Acquire(ctx, ev.id, r.w.Lease)
	} else {
		out = c.Reserve(ctx, ev.id)
	}
	switch out.Answer {
	case New, Acquired:
		r.acked.Add(1)
		return r.runStep(ctx, c, rng, ev)
	case Duplicate, Done:
		r.acked.Add(1)
		if rng.IntN(5) == 0 {
			c.Lookup(ctx, ev.id)
		}
		return false
	}
	return true
}

// runStep is the business step of a delivery that holds ev's key: one time
// in ten it fails and gives the key back (the delivery is sent again);
// otherwise its effect happens and the key is completed (a completion
// without answer is sent again: it only makes the key done).
//
// A release without answer is never sent again: keysvc's release names no
// holder, so a second one, after the first took effect and another
// delivery took the key, deletes that delivery's reservation, and the
// event's next delivery runs the step again (a hot event's step ran twice
// in a run whose clients sent it again). The key then stays reserved, as
// keysvc may have left it.
func (r *run) runStep(ctx context.Context, c *Client, rng *rand.Rand, ev event) (again bool) {
	if rng.IntN(10) == 0 {
		c.Release(ctx, ev.id)
		return true
	}
	r.fx.effect(EventKey(ev.id))
	if out := retry(ctx, func() Output { return c.Complete(ctx, ev.id) }); out.Answer == OK {
		r.fx.completed(EventKey(ev.id))
	}
	if rng.IntN(5) == 0 {
		c.Lookup(ctx, ev.id)
	}
	return false
}

// retry calls f until it is answered, five times at most, as a workflow's
// node retries a call that failed.
func retry(ctx context.Context, f func() Output) Output {
	var out Output
	for range 5 {
		if out = f(); out.Answer != Unknown || ctx.Err() != nil {
			return out
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return out
}

// contend is one operation, chosen at random, on a contended key.
func (r *run) contend(ctx context.Context, c *Client, rng *rand.Rand, ev event) {
	switch p := rng.IntN(20); {
	case p < 2:
		c.Reserve(ctx, ev.id)
	case p < 8:
		c.Acquire(ctx, ev.id, r.w.ShortLease)
	case p < 11:
		c.Complete(ctx, ev.id)
	case p < 14:
		c.Release(ctx, ev.id)
	default:
		c.Lookup(ctx, ev.id)
	}
}

func (r *run) resend(rng *rand.Rand, d delivery) {
	if d.resent >= maxResends {
		r.gaveUp.Add(1)
		return
	}
	r.resent.Add(1)
	d.resent++
	d.due = time.Now().Add(jitter(rng, 200*time.Millisecond<<min(d.resent, 3)))
	r.later(d)
}

func (r *run) later(d delivery) {
	r.mu.Lock()
	r.pending = append(r.pending, d)
	r.mu.Unlock()
}

// due takes a delivery whose time has come, if any.
func (r *run) due() (delivery, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	for i, d := range r.pending {
		if !d.due.After(now) {
			last := len(r.pending) - 1
			r.pending[i] = r.pending[last]
			r.pending = r.pending[:last]
			return d, true
		}
	}
	return delivery{}, false
}

// jitter is d give or take half.
func jitter(rng *rand.Rand, d time.Duration) time.Duration {
	return d/2 + time.Duration(rng.Int64N(int64(d)))
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
