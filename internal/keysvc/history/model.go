// Package history records what clients of keysvc's key API asked and were
// answered, and checks that history for linearizability with Porcupine
// against a model of one key: reserve (new or duplicate), acquire a lease
// (acquired, in progress or done), complete, release and lookup. An
// operation whose answer never came (a timeout, a reset connection, a 5xx
// after a change keysvc may have committed) is kept open: the model may
// apply it anywhere after its call, or never, as etcd's robustness tests
// do. Leases expire in the model: a lease's end is known to lie between
// its call plus the lease and its answer plus the lease (exactly, once an
// answer says it), and a takeover or a busy answer must fit that window.
//
// Beside the model, an effect counter in the style of Jepsen's checkers:
// clients that were told "new" or "acquired" run a step whose effect is
// recorded, and each event's effects are counted against what keysvc
// acknowledged (see Effects).
package history

import (
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"github.com/anishathalye/porcupine"
)

// Op is an operation of the key API.
type Op uint8

const (
	// Reserve is POST /v1/reservations.
	Reserve Op = iota
	// Acquire is POST /v1/reservations?lease=.
	Acquire
	// Complete is POST /v1/reservations/{key}/done.
	Complete
	// Release is DELETE /v1/reservations/{key}.
	Release
	// Lookup is GET /v1/reservations/{key}.
	Lookup
)

var opNames = [...]string{"reserve", "acquire", "complete", "release", "lookup"}

func (o Op) String() string { return opNames[o] }

// Answer is what keysvc answered, as the model reads it.
type Answer uint8

const (
	// Unknown: no answer came, or one that does not say whether the
	// change happened (a 5xx, a timeout, a reset connection).
	Unknown   Answer = iota
	New              // reserve: 201
	Duplicate        // reserve: 200, reserved false
	Acquired         // acquire: 201
	Busy             // acquire: 409, another attempt holds the lease
	Done             // acquire: 200, the key is done
	OK               // complete 200, release 204, lookup 200
	NotFound         // complete, release, lookup: 404
)

var answerNames = [...]string{"unknown", "new", "duplicate", "acquired", "busy", "done", "ok", "not found"}

func (a Answer) String() string { return answerNames[a] }

// States of a key, as keysvc names them (keysvc.StateProcessing and
// keysvc.StateDone).
const (
	StateProcessing = "processing"
	StateDone       = "done"
)

// Input is an operation as it was called. Call is the wall clock (Unix
// nanoseconds) when it was sent: lease ends are compared with it.
type Input struct {
	Op    Op
	Key   string
	Lease time.Duration // Acquire's
	Call  int64
}

// Output is what came back. Return is the wall clock when it came (0 when
// Unknown). State, Attempt and LeaseUntil are what the answer said: a
// duplicate's or a lookup's state, an acquired lease's attempt and end, a
// lookup's lease while the key is processing.
type Output struct {
	Answer     Answer
	State      string
	Attempt    int
	LeaseUntil int64
	Return     int64
}

// phase is a key's phase in the model.
type phase uint8

const (
	absent phase = iota
	processing
	done
)

// keyState is one possible state of a key. While processing, the lease
// of attempt ends somewhere in [leaseLo, leaseHi] (both equal once an
// answer told the end exactly); a done key keeps no attempt (no answer
// says it).
type keyState struct {
	phase            phase
	attempt          int
	leaseLo, leaseHi int64
}

// clockSlack covers the distance between the clocks that are compared:
// the test's call and return times, and keysvc's or PostgreSQL's now(),
// read on the same machine (PostgreSQL keeps microseconds).
const clockSlack = int64(2 * time.Millisecond)

// never is an end not yet bounded: the lease of an acquisition that may
// still commit.
const never = int64(math.MaxInt64)

// step is the model: every state key may be in after op, given that it
// was in s and out was answered. None means out is impossible from s.
func step(s keyState, in Input, out Output) []keyState {
	switch in.Op {
	case Reserve:
		return stepReserve(s, out)
	case Acquire:
		return stepAcquire(s, in, out)
	case Complete:
		if s.phase == absent {
			return unless(out.Answer == Unknown || out.Answer == NotFound, s)
		}
		return unless(out.Answer == Unknown || (out.Answer == OK && out.State == StateDone), keyState{phase: done})
	case Release:
		if s.phase == absent {
			return unless(out.Answer == Unknown || out.Answer == NotFound, s)
		}
		return unless(out.Answer == Unknown || out.Answer == OK, keyState{})
	case Lookup:
		return stepLookup(s, out)
	}
	return nil
}

func stepReserve(s keyState, out Output) []keyState {
	if s.phase == absent {
		return unless(out.Answer == Unknown || out.Answer == New, keyState{phase: done})
	}
	return unless(out.Answer == Unknown || (out.Answer == Duplicate && sameState(s, out.State)), s)
}

// stepAcquire is the lease guard's entry: a new key is acquired, a done
// one answers done, a held lease busy, and an expired one is taken over
// with the next attempt. An acquisition's lease ends at its server time
// plus the lease, a time between its call and its answer.
func stepAcquire(s keyState, in Input, out Output) []keyState {
	lease := int64(in.Lease)
	retHi := never
	if out.Answer != Unknown {
		retHi = out.Return
	}
	acquire := func(from int64, attempt int) []keyState {
		next := keyState{phase: processing, attempt: attempt, leaseLo: from + lease, leaseHi: addClamped(retHi, lease)}
		switch out.Answer {
		case Unknown:
			return []keyState{next}
		case Acquired:
			if out.Attempt != attempt || out.LeaseUntil < next.leaseLo-clockSlack || out.LeaseUntil > addClamped(next.leaseHi, clockSlack) {
				return nil
			}
			next.leaseLo, next.leaseHi = out.LeaseUntil, out.LeaseUntil
			return []keyState{next}
		}
		return nil
	}
	switch s.phase {
	case absent:
		return acquire(in.Call, 1)
	case done:
		return unless(out.Answer == Unknown || out.Answer == Done, s)
	}
	var next []keyState
	// Busy: at some server time t in [call, answer], t <= the lease's end.
	if addClamped(s.leaseHi, clockSlack) >= in.Call && (out.Answer == Unknown || out.Answer == Busy) {
		next = append(next, s)
	}
	// A takeover: at some t in [call, answer], t > the lease's end.
	if s.leaseLo < addClamped(retHi, clockSlack) {
		next = append(next, acquire(max(in.Call, s.leaseLo), s.attempt+1)...)
	}
	return next
}

func stepLookup(s keyState, out Output) []keyState {
	if s.phase == absent {
		return unless(out.Answer == Unknown || out.Answer == NotFound, s)
	}
	if out.Answer == Unknown {
		return []keyState{s}
	}
	if out.Answer != OK || !sameState(s, out.State) {
		return nil
	}
	if s.phase == done {
		return []keyState{s}
	}
	if out.Attempt != s.attempt || out.LeaseUntil < s.leaseLo-clockSlack || out.LeaseUntil > addClamped(s.leaseHi, clockSlack) {
		return nil
	}
	s.leaseLo, s.leaseHi = out.LeaseUntil, out.LeaseUntil
	return []keyState{s}
}

// sameState says whether an answer's state names s's phase (an answer
// without a state says nothing).
func sameState(s keyState, state string) bool {
	switch state {
	case "":
		return true
	case StateDone:
		return s.phase == done
	case StateProcessing:
		return s.phase == processing
	}
	return false
}

func unless(ok bool, s keyState) []keyState {
	if !ok {
		return nil
	}
	return []keyState{s}
}

func addClamped(t, d int64) int64 {
	if t > never-d {
		return never
	}
	return t + d
}

// Model is the key API's model for Porcupine, one partition per key.
func Model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: partitionByKey,
		Init:      func() []any { return []any{keyState{}} },
		Step: func(state, input, output any) []any {
			var out []any
			for _, s := range step(state.(keyState), input.(Input), output.(Output)) {
				out = append(out, s)
			}
			return out
		},
		Equal: func(a, b any) bool { return a.(keyState) == b.(keyState) },
		Hash: func(state any) uint64 {
			s := state.(keyState)
			h := fnv.New64a()
			fmt.Fprint(h, s.phase, s.attempt, s.leaseLo, s.leaseHi)
			return h.Sum64()
		},
		DescribeOperation: describeOperation,
		DescribeState:     func(state any) string { return describeState(state.(keyState)) },
	}
	return nm.ToModel()
}

func partitionByKey(ops []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	var keys []string
	for _, op := range ops {
		k := op.Input.(Input).Key
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], op)
	}
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, byKey[k])
	}
	return out
}

func describeOperation(input, output any) string {
	in, out := input.(Input), output.(Output)
	call := in.Op.String()
	if in.Op == Acquire {
		call += fmt.Sprintf("(%s)", in.Lease)
	}
	ans := out.Answer.String()
	if out.State != "" {
		ans += " " + out.State
	}
	if out.Attempt != 0 {
		ans += fmt.Sprintf(" attempt %d until %s", out.Attempt, clock(out.LeaseUntil))
	}
	return fmt.Sprintf("%s %s -> %s", call, in.Key, ans)
}

func describeState(s keyState) string {
	switch s.phase {
	case absent:
		return "absent"
	case done:
		return "done"
	}
	if s.leaseLo == s.leaseHi {
		return fmt.Sprintf("processing (attempt %d until %s)", s.attempt, clock(s.leaseLo))
	}
	return fmt.Sprintf("processing (attempt %d until %s..%s)", s.attempt, clock(s.leaseLo), clock(s.leaseHi))
}

// clock shows a wall-clock time in Unix nanoseconds with its milliseconds.
func clock(ns int64) string {
	if ns == never {
		return "never"
	}
	return time.Unix(0, ns).UTC().Format("15:04:05.000")
}
