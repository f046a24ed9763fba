package history

import (
	"os"
	"strings"
	"testing"
	"time"
)

// op is one operation of a hand-written history: called at call, answered
// at ret (ms after the history's start; ret 0 and Unknown: never).
type op struct {
	call, ret int64
	in        Input
	out       Output
}

const t0 = int64(1_000_000_000_000_000_000) // a wall clock, in ns

func ms(n int64) int64 { return t0 + n*int64(time.Millisecond) }

func reserve(a Answer, state string) (Input, Output) {
	return Input{Op: Reserve, Key: "k"}, Output{Answer: a, State: state}
}

func acquire(lease time.Duration, a Answer, attempt int, until int64) (Input, Output) {
	return Input{Op: Acquire, Key: "k", Lease: lease}, Output{Answer: a, Attempt: attempt, LeaseUntil: until}
}

func simple(o Op, a Answer, state string) (Input, Output) {
	return Input{Op: o, Key: "k"}, Output{Answer: a, State: state}
}

func record1(r *Recorder, o op) {
	o.in.Call = ms(o.call)
	if o.out.Answer != Unknown {
		o.out.Return = ms(o.ret)
	}
	r.Add(o.in, o.out)
}

func checkOps(t *testing.T, ops ...op) Report {
	t.Helper()
	r := &Recorder{}
	for _, o := range ops {
		record1(r, o)
	}
	rep, err := Check(r, t.TempDir(), "unit")
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// h is an operation called at call and answered at ret (ms).
func h(call, ret int64) func(Input, Output) op {
	return func(in Input, out Output) op { return op{call, ret, in, out} }
}

// Each history is legal or illegal by the key API's rules; the checker
// must say which.
func TestModel(t *testing.T) {
	const long = time.Hour
	cases := []struct {
		name  string
		legal bool
		ops   []op
	}{
		{"reserve new, again duplicate, released, new again", true, []op{
			h(0, 1)(reserve(New, "")), h(2, 3)(reserve(Duplicate, StateDone)),
			h(4, 5)(simple(Release, OK, "")), h(6, 7)(reserve(New, "")),
		}},
		{"two reservations answered new, no release between", false, []op{
			h(0, 10)(reserve(New, "")), h(5, 15)(reserve(New, "")),
		}},
		{"a duplicate with nothing reserved", false, []op{
			h(0, 1)(reserve(Duplicate, StateDone)),
		}},
		{"a duplicate explained by a reservation whose answer never came", true, []op{
			h(0, 0)(reserve(Unknown, "")), h(5, 6)(reserve(Duplicate, StateDone)),
		}},
		{"a reservation without answer may never have happened", true, []op{
			h(0, 0)(reserve(Unknown, "")), h(5, 6)(simple(Lookup, NotFound, "")), h(7, 8)(reserve(New, "")),
		}},
		{"a duplicate naming the wrong state", false, []op{
			h(0, 1)(acquire(long, Acquired, 1, ms(0)+int64(long))), h(2, 3)(reserve(Duplicate, StateDone)),
		}},
		{"a lease granted twice", false, []op{
			h(0, 10)(acquire(long, Acquired, 1, ms(5)+int64(long))), h(1, 12)(acquire(long, Acquired, 1, ms(6)+int64(long))),
		}},
		{"a lease held: busy, then done after its completion", true, []op{
			h(0, 10)(acquire(long, Acquired, 1, ms(5)+int64(long))), h(11, 12)(acquire(long, Busy, 0, 0)),
			h(13, 14)(simple(Complete, OK, StateDone)), h(15, 16)(acquire(long, Done, 0, 0)),
		}},
		{"an expired lease taken over with the next attempt", true, []op{
			h(0, 10)(acquire(time.Second, Acquired, 1, ms(5)+int64(time.Second))),
			h(1100, 1110)(acquire(time.Second, Acquired, 2, ms(1105)+int64(time.Second))),
		}},
		{"a lease taken over before it expired", false, []op{
			h(0, 10)(acquire(time.Second, Acquired, 1, ms(5)+int64(time.Second))),
			h(500, 510)(acquire(time.Second, Acquired, 2, ms(505)+int64(time.Second))),
		}},
		{"busy long after the lease expired", false, []op{
			h(0, 10)(acquire(time.Second, Acquired, 1, ms(5)+int64(time.Second))),
			h(3000, 3010)(acquire(time.Second, Busy, 0, 0)),
		}},
		{"an acquisition without answer expires in time too", true, []op{
			h(0, 0)(acquire(time.Second, Unknown, 0, 0)), h(100, 110)(acquire(time.Second, Busy, 0, 0)),
			h(5000, 5010)(acquire(time.Second, Acquired, 2, ms(5005)+int64(time.Second))),
		}},
		{"a completion acknowledged, then the key gone without a release", false, []op{
			h(0, 1)(acquire(long, Acquired, 1, ms(0)+int64(long))), h(2, 3)(simple(Complete, OK, StateDone)),
			h(4, 5)(simple(Lookup, NotFound, "")),
		}},
		{"a release without answer explains a key gone", true, []op{
			h(0, 1)(acquire(long, Acquired, 1, ms(0)+int64(long))), h(2, 0)(simple(Release, Unknown, "")),
			h(4, 5)(simple(Lookup, NotFound, "")),
		}},
		{"a lookup naming another attempt", false, []op{
			h(0, 1)(acquire(long, Acquired, 1, ms(0)+int64(long))),
			h(2, 3)(Input{Op: Lookup, Key: "k"}, Output{Answer: OK, State: StateProcessing, Attempt: 2, LeaseUntil: ms(0) + int64(long)}),
		}},
		{"complete and release of a key never reserved", true, []op{
			h(0, 1)(simple(Complete, NotFound, "")), h(2, 3)(simple(Release, NotFound, "")),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := checkOps(t, c.ops...)
			if rep.Failed() == c.legal {
				t.Errorf("legal=%v, the checker says %s", c.legal, rep)
			}
			if !c.legal && rep.Visualization == "" {
				t.Errorf("an illegal history and no visualisation: %s", rep)
			}
		})
	}
}

// The visualisation is Porcupine's HTML page, naming the failing key.
func TestCheckWritesTheVisualisation(t *testing.T) {
	rep := checkOps(t, h(0, 10)(reserve(New, "")), h(5, 15)(reserve(New, "")))
	page, err := os.ReadFile(rep.Visualization)
	if err != nil {
		t.Fatalf("%s: %v", rep, err)
	}
	if !strings.Contains(string(page), "<html") || !strings.Contains(string(page), `"Description":"reserve k -\u003e new"`) {
		t.Errorf("the page does not show the history: %.300s", page)
	}
}
