package keysvc

import (
	"context"
	"errors"
	"sync"
)

// coalescer turns concurrent single-key calls into batches: each of its
// workers waits for one request, takes whatever else is queued (up to max),
// runs the batch as one statement and one commit, and answers every caller
// of the batch after it. A request alone is sent at once: nothing waits for
// a batch to fill. With several workers, a batch in flight does not hold the
// next one back.
type coalescer[Req, Res any] struct {
	queue chan *call[Req, Res]
	max   int
	run   func(ctx context.Context, reqs []Req) ([]Res, error)
	ctx   context.Context // ends with close
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

type call[Req, Res any] struct {
	ctx  context.Context
	req  Req
	done chan result[Res]
}

type result[Res any] struct {
	res Res
	err error
}

// errStopped is the answer of a call made after Close.
var errStopped = errors.New("the store is closed")

func newCoalescer[Req, Res any](workers, max int, run func(ctx context.Context, reqs []Req) ([]Res, error)) *coalescer[Req, Res] {
	ctx, stop := context.WithCancel(context.Background())
	c := &coalescer[Req, Res]{queue: make(chan *call[Req, Res], max*workers), max: max, run: run, ctx: ctx, stop: stop}
	for range workers {
		c.wg.Add(1)
		go c.work(ctx)
	}
	return c
}

// do queues req and waits for its batch. A caller that gives up (its context
// ends) leaves the batch unharmed: the others still get their answers, and
// its own request is committed or not like theirs.
func (c *coalescer[Req, Res]) do(ctx context.Context, req Req) (Res, error) {
	cl := &call[Req, Res]{ctx: ctx, req: req, done: make(chan result[Res], 1)}
	var zero Res
	select {
	case c.queue <- cl:
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-c.ctx.Done():
		return zero, errStopped
	}
	select {
	case r := <-cl.done:
		return r.res, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-c.ctx.Done():
		// close answers what it finds queued; a call it missed ends here.
		select {
		case r := <-cl.done:
			return r.res, r.err
		default:
			return zero, errStopped
		}
	}
}

func (c *coalescer[Req, Res]) work(ctx context.Context) {
	defer c.wg.Done()
	batch := make([]*call[Req, Res], 0, c.max)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case cl := <-c.queue:
			batch = append(batch, cl)
		}
	fill:
		for len(batch) < c.max {
			select {
			case cl := <-c.queue:
				batch = append(batch, cl)
			default:
				break fill
			}
		}
		// Callers that already gave up are not sent.
		live := batch[:0]
		for _, cl := range batch {
			if cl.ctx.Err() == nil {
				live = append(live, cl)
			}
		}
		if len(live) == 0 {
			continue
		}
		reqs := make([]Req, len(live))
		for i, cl := range live {
			reqs[i] = cl.req
		}
		res, err := c.run(ctx, reqs)
		for i, cl := range live {
			if err != nil {
				cl.done <- result[Res]{err: err}
			} else {
				cl.done <- result[Res]{res: res[i]}
			}
		}
	}
}

// close stops the workers; calls still queued get errStopped.
func (c *coalescer[Req, Res]) close() {
	c.stop()
	c.wg.Wait()
	for {
		select {
		case cl := <-c.queue:
			cl.done <- result[Res]{err: errStopped}
		default:
			return
		}
	}
}
