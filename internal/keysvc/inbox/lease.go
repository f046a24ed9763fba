package inbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// lease is this keysvc's claim to be alive, renewed in inbox_workers every
// ttl/5. Every call to a target runs under it: callContext ends the call
// when the lease may have lapsed, before the database lets another keysvc
// (or this one restarted) rescue the delivery. So a rescued delivery is
// never sent while its first attempt can still be running, and a keysvc
// that dies has its deliveries in flight taken over within ttl plus one
// rescue tick.
type lease struct {
	in  *Inbox
	id  string // River's client id: what attempted_by names
	ttl time.Duration

	mu     sync.Mutex
	until  time.Time // by this process's clock: calls may run until then
	fence  context.Context
	cancel context.CancelFunc
	timer  *time.Timer
}

// leaseMargin is how much earlier than the database this keysvc counts its
// lease out: room for the call's cancellation to take effect and for clocks
// that run at slightly different rates.
func leaseMargin(ttl time.Duration) time.Duration { return min(2*time.Second, ttl/5) }

// newWorkerID names this process for River and its lease: host, pid and a
// random suffix, so that a restarted keysvc is never taken for the one that
// died (River allows 100 characters).
func newWorkerID() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, host)
	if len(host) > 40 {
		host = host[:40]
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("keysvc_%s_%d_%s", host, os.Getpid(), hex.EncodeToString(b))
}

func newLease(in *Inbox, ttl time.Duration) *lease {
	l := &lease{in: in, id: newWorkerID(), ttl: ttl}
	l.fence, l.cancel = context.WithCancel(context.Background())
	l.cancel() // not held until the first renewal
	return l
}

// renew extends the lease; the local deadline counts from before the
// statement was sent. A failure leaves the deadline as it was: the fence
// ends the calls in flight when it passes.
func (l *lease) renew(ctx context.Context) error {
	sent := time.Now()
	if _, err := l.in.pool.Exec(ctx, l.in.tables.RenewWorker(), l.id, l.ttl.Milliseconds()); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.until = sent.Add(l.ttl - leaseMargin(l.ttl))
	if l.fence.Err() != nil {
		l.fence, l.cancel = context.WithCancel(context.Background())
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	cancel := l.cancel
	l.timer = time.AfterFunc(time.Until(l.until), cancel)
	return nil
}

// callContext returns the context of one call to a target: parent, ended
// also when the lease may lapse (the fence, whose end moves with every
// renewal). ok is false when the lease is not held now (the database has
// not answered for a while): no call may start.
func (l *lease) callContext(parent context.Context) (context.Context, context.CancelFunc, bool) {
	l.mu.Lock()
	fence, until := l.fence, l.until
	l.mu.Unlock()
	if fence.Err() != nil || !time.Now().Before(until) {
		return nil, nil, false
	}
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(fence, cancel)
	return ctx, func() { stop(); cancel() }, true
}

// heartbeat renews the lease every ttl/5 until ctx ends, and says once when
// a renewal fails and again when one succeeds.
func (l *lease) heartbeat(ctx context.Context) {
	t := time.NewTicker(l.ttl / 5)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, l.ttl/5)
		err := l.renew(rctx)
		cancel()
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			failing = true
			l.in.logger.Warn("inbox lease not renewed: deliveries stop when it lapses, and another keysvc may take them over", "worker", l.id, "error", err)
		case err == nil && failing:
			failing = false
			l.in.logger.Info("inbox lease renewed again", "worker", l.id)
		}
	}
}

// resign stops the fence and deletes the lease, once nothing of this
// keysvc runs any more.
func (l *lease) resign(ctx context.Context) {
	l.mu.Lock()
	if l.timer != nil {
		l.timer.Stop()
	}
	l.cancel()
	l.mu.Unlock()
	_, _ = l.in.pool.Exec(ctx, l.in.tables.ResignWorker(), l.id)
}
