package history

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
)

// Recorder collects the operations of a run, from any number of clients
// at once.
type Recorder struct {
	mu  sync.Mutex
	ops []record
	// clients numbers Porcupine's client ids; a client whose answer never
	// came takes a new one, since its open operation stays in the history
	// beside its next ones.
	clients atomic.Int64
}

// record is one operation, kept small: a soak run holds millions.
type record struct {
	client int32
	in     Input
	out    Output
}

// now is the wall clock in Unix nanoseconds: lease ends, which keysvc and
// PostgreSQL read from the same clock, are compared with it.
func now() int64 { return time.Now().UnixNano() }

func (r *Recorder) newClient() int { return int(r.clients.Add(1) - 1) }

func (r *Recorder) add(client int, in Input, out Output) {
	r.mu.Lock()
	r.ops = append(r.ops, record{client: int32(client), in: in, out: out})
	r.mu.Unlock()
}

// Len is how many operations were recorded.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

// Add records an operation recorded elsewhere (a test's own history).
func (r *Recorder) Add(in Input, out Output) {
	r.add(r.newClient(), in, out)
}

// operations returns the history for Porcupine. A lookup that got no
// answer changed nothing and is left out; any other operation without an
// answer stays open: it returns after everything else, so the model may
// apply it at any point after its call, or not at all.
func (r *Recorder) operations() (ops []porcupine.Operation, open int) {
	r.mu.Lock()
	recs := r.ops
	r.mu.Unlock()
	var last int64
	for _, rec := range recs {
		last = max(last, rec.in.Call, rec.out.Return)
	}
	ops = make([]porcupine.Operation, 0, len(recs))
	for _, rec := range recs {
		ret := rec.out.Return
		if rec.out.Answer == Unknown {
			if rec.in.Op == Lookup {
				continue
			}
			open++
			ret = last + 1
		}
		ops = append(ops, porcupine.Operation{ClientId: int(rec.client), Input: rec.in, Call: rec.in.Call, Output: rec.out, Return: ret})
	}
	return ops, open
}
