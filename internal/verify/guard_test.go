package verify

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/n8napi"
)

func generated(t *testing.T, o generator.Options) n8napi.Workflow {
	t.Helper()
	files, err := generator.Files(o)
	if err != nil {
		t.Fatal(err)
	}
	var w n8napi.Workflow
	if err := json.Unmarshal(files[generator.FileWorkflow], &w); err != nil {
		t.Fatal(err)
	}
	return w
}

// node returns w's node named name, to change in place.
func node(t *testing.T, w n8napi.Workflow, name string) map[string]any {
	t.Helper()
	for _, n := range w.Nodes {
		if n["name"] == name {
			return n
		}
	}
	t.Fatalf("no node %q", name)
	return nil
}

func TestFindGeneratedGuards(t *testing.T) {
	for _, tc := range []struct {
		opts                     generator.Options
		reserve, decision, first string
		lease                    bool
		newOutput                int
		keysvc                   string
	}{
		{opts: generator.Options{}, reserve: generator.NodeAcquireLease, decision: generator.NodeLeaseAcquired, first: "Business Step (insert business_log)", lease: true},
		{opts: generator.Options{Hashing: generator.HashingCryptoNode}, reserve: generator.NodeAcquireLease, decision: generator.NodeLeaseAcquired, first: "Business Step (insert business_log)", lease: true},
		{opts: generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardAtMostOnce}}, reserve: "Reserve Key", decision: "Row Returned?", first: "Business Step (insert business_log)"},
		{opts: generator.Options{Verify: "stripe", ReserveOptions: generator.ReserveOptions{EventsTable: "stripe_events", Guard: generator.GuardAtMostOnce}}, reserve: "Reserve Key", decision: "Row Returned?", first: "Business Step (insert business_log)"},
		{opts: generator.Options{Verify: "stripe", ReserveOptions: generator.ReserveOptions{EventsTable: "stripe_events"}}, reserve: generator.NodeAcquireLease, decision: generator.NodeLeaseAcquired, first: "Business Step (insert business_log)", lease: true},
		{opts: generator.Options{Hashing: generator.HashingKeysvc, ReserveOptions: generator.ReserveOptions{KeysvcURL: "http://keysvc.internal:8080", Guard: generator.GuardAtMostOnce}}, reserve: "Reserve via keysvc", decision: "Reserved?", first: "Business Step (insert business_log)", keysvc: "http://keysvc.internal:8080"},
		{opts: generator.Options{Hashing: generator.HashingKeysvc, ReserveOptions: generator.ReserveOptions{KeysvcURL: "http://keysvc.internal:8080"}}, reserve: "Reserve via keysvc", decision: "Reserved?", first: "Business Step (insert business_log)", keysvc: "http://keysvc.internal:8080"},
		// The community node reserves and decides in one node.
		{opts: generator.Options{Hashing: generator.HashingNode, ReserveOptions: generator.ReserveOptions{Guard: generator.GuardAtMostOnce}}, reserve: "Idempotency Guard", decision: "Idempotency Guard", first: "Business Step (insert business_log)"},
		{opts: generator.Options{Hashing: generator.HashingNode, ReserveOptions: generator.ReserveOptions{EventsTable: "shop.events"}}, reserve: "Idempotency Guard", decision: "Idempotency Guard", first: "Business Step (insert business_log)", lease: true},
	} {
		g, err := Find(generated(t, tc.opts))
		if err != nil {
			t.Fatalf("%+v: %v", tc.opts, err)
		}
		if g.Reserve != tc.reserve || g.Decision != tc.decision || g.FirstBusiness() != tc.first || g.Lease != tc.lease || g.NewOutput != tc.newOutput {
			t.Errorf("%+v: found reserve %q, decision %q (new output %d), first business %q, lease %v", tc.opts, g.Reserve, g.Decision, g.NewOutput, g.FirstBusiness(), g.Lease)
		}
		if g.PlainEvents == (tc.keysvc != "") {
			t.Errorf("%+v: plain events table %v", tc.opts, g.PlainEvents)
		}
		if g.Keysvc != (tc.keysvc != "") || g.KeysvcBase != tc.keysvc {
			t.Errorf("%+v: keysvc %v at %q", tc.opts, g.Keysvc, g.KeysvcBase)
		}
		wantTable := tc.opts.EventsTable
		if wantTable == "" && tc.keysvc == "" {
			wantTable = "processed_events"
		}
		if g.EventsTable != wantTable {
			t.Errorf("%+v: events table %q", tc.opts, g.EventsTable)
		}
		// Release Key is reached from the step's error output and, with a
		// lease, from Step Succeeded?'s second output: after the step, never
		// before it.
		if biz := g.Business(); slices.ContainsFunc(biz, func(n string) bool { return strings.HasPrefix(n, "Respond") }) || slices.Index(biz, "Release Key") == 0 {
			t.Errorf("%+v: business branch %v holds a Respond or starts with the release", tc.opts, biz)
		}
		if !g.HasErrorOutput(g.FirstBusiness()) {
			t.Errorf("%+v: the business step's error output not seen", tc.opts)
		}
	}
}

func TestFindRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   generator.Options
		change func(t *testing.T, w *n8napi.Workflow)
		want   any
	}{
		{"reservation turned into a SELECT", generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardAtMostOnce}}, func(t *testing.T, w *n8napi.Workflow) {
			node(t, *w, "Reserve Key")["parameters"].(map[string]any)["query"] = "SELECT key FROM processed_events WHERE key = $1"
		}, new(*NotAGuardError)},
		{"lease turned into a SELECT", generator.Options{}, func(t *testing.T, w *n8napi.Workflow) {
			node(t, *w, generator.NodeAcquireLease)["parameters"].(map[string]any)["query"] = "SELECT key, 'acquired' AS outcome FROM processed_events WHERE key = $1"
		}, new(*NotAGuardError)},
		{"no webhook", generator.Options{}, func(t *testing.T, w *n8napi.Workflow) {
			node(t, *w, "Webhook")["type"] = "n8n-nodes-base.manualTrigger"
		}, new(*NotAGuardError)},
	} {
		w := generated(t, tc.opts)
		if tc.change != nil {
			tc.change(t, &w)
		}
		if g, err := Find(w); !errors.As(err, tc.want) {
			t.Errorf("%s: got %+v, %v; want %T", tc.name, g, err, tc.want)
		}
	}
}

// A user who inverted the decision's condition keeps the wiring: the new
// output is still the one from which the key is released.
func TestFindNewOutputFromTheRelease(t *testing.T) {
	for guard, decision := range map[generator.Guard]string{generator.GuardLease: generator.NodeLeaseAcquired, generator.GuardAtMostOnce: "Row Returned?"} {
		w := generated(t, generator.Options{ReserveOptions: generator.ReserveOptions{Guard: guard}})
		rows := w.Connections[decision].(map[string]any)["main"].([]any)
		rows[0], rows[1] = rows[1], rows[0]
		g, err := Find(w)
		if err != nil {
			t.Fatal(err)
		}
		if g.NewOutput != 1 || g.FirstBusiness() != "Business Step (insert business_log)" {
			t.Errorf("%s: new output %d, first business %q", guard, g.NewOutput, g.FirstBusiness())
		}
	}
	w := generated(t, generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardAtMostOnce}})
	// Without any release, the graph does not tell; Run decides.
	node(t, w, "Release Key")["parameters"].(map[string]any)["query"] = "SELECT 1"
	if g, _ := Find(w); g.NewOutput != -1 {
		t.Errorf("without a release: new output %d, want -1", g.NewOutput)
	}
}

// Without a release the first new event's execution settles the new
// output; a duplicate's execution, read before or after, does not.
func TestLearnNewOutputFromTheFirstNewEvent(t *testing.T) {
	w := generated(t, generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardAtMostOnce}})
	rows := w.Connections["Row Returned?"].(map[string]any)["main"].([]any)
	rows[0], rows[1] = rows[1], rows[0]
	node(t, w, "Release Key")["parameters"].(map[string]any)["query"] = "SELECT 1"
	g, err := Find(w)
	if err != nil {
		t.Fatal(err)
	}
	business := "Business Step (insert business_log)"
	duplicate := n8napi.Run{Outputs: map[string][]int{"Row Returned?": {1, 0}}}
	fresh := n8napi.Run{Outputs: map[string][]int{"Row Returned?": {0, 1}, business: {1}}}
	r := &runner{guard: g}
	if r.ranBusiness(duplicate) || r.ranBusiness(fresh) {
		t.Fatal("the business branch is known before any new event was seen")
	}
	r.learnNewOutput(fresh)
	r.learnNewOutput(duplicate)
	if r.guard.NewOutput != 1 || !r.ranBusiness(fresh) || r.ranBusiness(duplicate) {
		t.Errorf("new output %d; business ran: fresh %v, duplicate %v; want 1, true, false", r.guard.NewOutput, r.ranBusiness(fresh), r.ranBusiness(duplicate))
	}
}

func TestFindTransactional(t *testing.T) {
	g, err := Find(generated(t, generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardTransactional}}))
	if err != nil {
		t.Fatal(err)
	}
	if !g.Transactional || g.Decides() != "Reserve and Write" || g.Business() != nil || g.FirstBusiness() != "" {
		t.Errorf("found %+v", g)
	}
	// Without its "new" column, nothing tells a duplicate from a new event.
	w := generated(t, generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardTransactional}})
	p := node(t, w, "Reserve and Write")["parameters"].(map[string]any)
	p["query"] = strings.Replace(p["query"].(string), "AS new", "AS fresh", 1)
	if _, err := Find(w); !errors.As(err, new(*UnsupportedError)) {
		t.Errorf("without the new column: %v, want an UnsupportedError", err)
	}
}

func TestFindTheInboxReceiver(t *testing.T) {
	files, err := generator.Files(generator.Options{Pattern: generator.PatternInbox})
	if err != nil {
		t.Fatal(err)
	}
	var w n8napi.Workflow
	if err := json.Unmarshal(files[generator.FileReceiver], &w); err != nil {
		t.Fatal(err)
	}
	g, err := Find(w)
	if err != nil {
		t.Fatal(err)
	}
	if g.Reserve != "Save Receipt" || g.PlainEvents || g.Decision != "New Receipt?" || !slices.Equal(g.SubWorkflowCalls, []string{"Hand Off to Worker"}) {
		t.Errorf("found reserve %q (plain events %v), decision %q, sub-workflow calls %v", g.Reserve, g.PlainEvents, g.Decision, g.SubWorkflowCalls)
	}
	// A new receipt only goes on to the worker (when none drains): the
	// business branch routes to the call and does nothing else.
	g.NewOutput = 0
	if call := g.HandOff(); call != "Hand Off to Worker" {
		t.Errorf("the receiver hands a new event off through %q, want Hand Off to Worker", call)
	}
}

// The community node's receiver: Save Inbox Receipt is both the receipt
// and the decision, a new receipt is json.new, and Start Worker hands it
// off.
func TestFindTheCommunityNodeReceiver(t *testing.T) {
	files, err := generator.Files(generator.Options{Pattern: generator.PatternInbox, Hashing: generator.HashingNode, InboxOptions: generator.InboxOptions{DBSchema: "shop"}})
	if err != nil {
		t.Fatal(err)
	}
	var w n8napi.Workflow
	if err := json.Unmarshal(files[generator.FileReceiver], &w); err != nil {
		t.Fatal(err)
	}
	g, err := Find(w)
	if err != nil {
		t.Fatal(err)
	}
	if g.Reserve != generator.NodeSaveReceipt || !g.Receipt || g.Decides() != generator.NodeSaveReceipt || g.EventsTable != "shop.inbox_events" || g.PlainEvents {
		t.Errorf("found reserve %q (receipt %v, plain events %v), decides %q, events %q", g.Reserve, g.Receipt, g.PlainEvents, g.Decides(), g.EventsTable)
	}
	if call := g.HandOff(); call == "" {
		t.Error("the node's receiver hands no new event off")
	}
}

func TestTally(t *testing.T) {
	got := tally([]answer{{status: 200}, {status: 500}, {status: 200}, {body: "connection reset"}})
	if want := "answers: 2 × 200, 1 × 500, 1 × no answer"; got != want {
		t.Errorf("tally = %q, want %q", got, want)
	}
}
