package nodered

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
)

func TestFromGenerate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     generator.Options
		want   Options
		option string // the *generator.OptionError's option, "" for none
	}{
		{name: "defaults: a lease of 5 minutes", want: Options{Path: generator.DefaultWebhookPath, Name: generator.DefaultWorkflowName, Lease: 5 * time.Minute}},
		{name: "lease", in: generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardLease, Lease: 90 * time.Second}},
			want: Options{Path: generator.DefaultWebhookPath, Name: generator.DefaultWorkflowName, Lease: 90 * time.Second}},
		{name: "at most once: no lease", in: generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardAtMostOnce}},
			want: Options{Path: generator.DefaultWebhookPath, Name: generator.DefaultWorkflowName}},
		{name: "stripe verified, its preset", in: generator.Options{WebhookPath: "hooks/stripe", Verify: "stripe"},
			want: Options{Path: "hooks/stripe", Name: generator.DefaultWorkflowName, Verify: "stripe", Preset: "stripe", Lease: 5 * time.Minute}},
		{name: "inbox target", in: generator.Options{InboxOptions: generator.InboxOptions{Receiver: generator.ReceiverKeysvc}},
			want: Options{Path: generator.DefaultWebhookPath, Name: generator.DefaultWorkflowName, InboxTarget: true, Lease: 5 * time.Minute}},
		{name: "verify none", in: generator.Options{Verify: "none"}, want: Options{Path: generator.DefaultWebhookPath, Name: generator.DefaultWorkflowName, Lease: 5 * time.Minute}},
		{name: "upper-case path", in: generator.Options{WebhookPath: "Stripe"}, option: "webhook path"},
		{name: "path parameter", in: generator.Options{WebhookPath: "hooks/:id"}, option: "webhook path"},
		{name: "two-line name", in: generator.Options{WorkflowName: "a\nb"}, option: "workflow name"},
		{name: "transactional", in: generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardTransactional}}, option: "guard mode"},
		{name: "lease too short", in: generator.Options{ReserveOptions: generator.ReserveOptions{Guard: generator.GuardLease, Lease: time.Millisecond}}, option: "lease"},
		{name: "unknown provider", in: generator.Options{Verify: "paypal"}, option: "verify provider"},
		{name: "verify behind the inbox", in: generator.Options{Verify: "stripe", InboxOptions: generator.InboxOptions{Receiver: generator.ReceiverKeysvc}}, option: "verify provider"},
		{name: "unknown preset", in: generator.Options{Preset: "paypal"}, option: "preset"},
		{name: "n8n receiver name", in: generator.Options{InboxOptions: generator.InboxOptions{Receiver: "other"}}, option: "receiver"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FromGenerate(tc.in)
			var oe *generator.OptionError
			switch {
			case tc.option == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.option == "" && got != tc.want:
				t.Fatalf("got %+v, want %+v", got, tc.want)
			case tc.option != "" && (!errors.As(err, &oe) || oe.Option != tc.option):
				t.Fatalf("error %v, want an OptionError on %q", err, tc.option)
			}
		})
	}
}

// decode returns the flow's nodes by name, and checks what Node-RED needs
// to load it: unique ids, every wire and Catch scope naming a node of it,
// every node on the flow's tab.
func decode(t *testing.T, raw []byte) map[string]map[string]any {
	t.Helper()
	var nodes []map[string]any
	if err := json.Unmarshal(raw, &nodes); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	byName := map[string]map[string]any{}
	tab := ""
	for _, n := range nodes {
		id, _ := n["id"].(string)
		if id == "" || ids[id] {
			t.Fatalf("node %v: id missing or repeated", n["name"])
		}
		ids[id] = true
		if n["type"] == "tab" {
			tab = id
			continue
		}
		byName[n["name"].(string)] = n
	}
	for name, n := range byName {
		if n["z"] != tab {
			t.Errorf("%s: not on the flow's tab", name)
		}
		wires, _ := n["wires"].([]any)
		for _, out := range wires {
			for _, to := range out.([]any) {
				if !ids[to.(string)] {
					t.Errorf("%s: wired to %v, which is not in the flow", name, to)
				}
			}
		}
		if n["type"] == "catch" {
			for _, s := range n["scope"].([]any) {
				if !ids[s.(string)] {
					t.Errorf("%s: scope %v is not in the flow", name, s)
				}
			}
		}
	}
	return byName
}

func TestFlowShape(t *testing.T) {
	for _, o := range []Options{
		{Path: "hooks", Name: "Reserve"},
		{Path: "hooks", Name: "Lease", Lease: time.Minute},
		{Path: "stripe", Name: "Stripe", Verify: "stripe", Preset: "stripe"},
		{Path: "target", Name: "Inbox target", InboxTarget: true},
	} {
		t.Run(o.Name, func(t *testing.T) {
			raw, err := Flow(o)
			if err != nil {
				t.Fatal(err)
			}
			nodes := decode(t, raw)
			in := nodes[NodeIn]
			if in["url"] != "/"+o.Path || in["skipBodyParsing"] != true || in["method"] != "post" {
				t.Errorf("the HTTP In node: %v", in)
			}
			for _, name := range []string{NodeReserve, NodeReleased} {
				if nodes[name]["senderr"] != true {
					t.Errorf("%s answers a failed call out of its output too (senderr is not set)", name)
				}
			}
			_, marks := nodes[NodeDone]
			if marks != (o.Lease > 0) {
				t.Errorf("Mark done present: %v, lease %s", marks, o.Lease)
			}
			prep := nodes[NodePrepare]["func"].(string)
			if o.Lease > 0 && !strings.Contains(prep, "lease=60s") {
				t.Errorf("the lease is not asked of keysvc: %s", prep)
			}
			if o.Verify != "" && (!strings.Contains(prep, "provider=stripe") || !strings.Contains(prep, "Stripe-Signature")) {
				t.Errorf("the provider or its header is not passed on: %s", prep)
			}
			if strings.Contains(prep, "Idempotency-Key") != o.InboxTarget {
				t.Errorf("the forward's Idempotency-Key taken: %v, inbox target %v", !o.InboxTarget, o.InboxTarget)
			}
		})
	}
}

// The flow holds no secret and no URL of keysvc: both come from the
// environment of the Node-RED that runs it.
func TestFlowReadsKeysvcFromTheEnvironment(t *testing.T) {
	raw, err := Flow(Options{Path: "p", Name: "n", Lease: time.Minute, Verify: "stripe", Preset: "stripe"})
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	for _, leak := range []string{"http://", "https://", "whsec_", "KEYSVC_SECRET"} {
		if strings.Contains(text, leak) {
			t.Errorf("flows.json holds %q", leak)
		}
	}
	for _, name := range []string{NodePrepare, NodeMarkDone, NodeRelease} {
		code := decode(t, raw)[name]["func"].(string)
		if !strings.Contains(code, "env.get('"+EnvURL+"')") || !strings.Contains(code, "env.get('"+EnvToken+"')") {
			t.Errorf("%s does not read %s and %s from the environment", name, EnvURL, EnvToken)
		}
	}
}

// Flows of two paths can be imported into one Node-RED: no id is shared.
func TestFlowIDsDependOnThePath(t *testing.T) {
	a, _ := Flow(Options{Path: "a", Name: "n"})
	b, _ := Flow(Options{Path: "b", Name: "n"})
	var na, nb []map[string]any
	json.Unmarshal(a, &na)
	json.Unmarshal(b, &nb)
	seen := map[any]bool{}
	for _, n := range na {
		seen[n["id"]] = true
	}
	for _, n := range nb {
		if seen[n["id"]] {
			t.Fatalf("node %v has the same id in the flows of two paths", n["name"])
		}
	}
	again, _ := Flow(Options{Path: "a", Name: "n"})
	if string(again) != string(a) {
		t.Error("the same options gave two flows")
	}
}

func TestReadme(t *testing.T) {
	files, err := Files(Options{Path: "orders", Name: "Orders", Lease: time.Minute, Verify: "shopify", Preset: "shopify"})
	if err != nil {
		t.Fatal(err)
	}
	readme := string(files[FileReadme])
	for _, want := range []string{"POST /orders", "KEYSVC_URL", "KEYSVC_TOKEN", "KEYSVC_SECRET_SHOPIFY", NodeStep, NodeStepFails, "409"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md does not say %q", want)
		}
	}
	decode(t, files[FileFlows])
}
