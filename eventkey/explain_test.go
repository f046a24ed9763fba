package eventkey_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/conformance"
	"github.com/idemhook/idemhook/eventkey"
)

var hashRules = map[eventkey.Rule]bool{
	eventkey.RuleInvalidUTF8: true, eventkey.RuleNotJSON: true, eventkey.RuleNotObject: true, eventkey.RuleTooDeep: true,
	eventkey.RuleNoID: true, eventkey.RuleIDNotString: true, eventkey.RuleIDEmpty: true, eventkey.RuleIDTooLong: true,
	eventkey.RuleIDControl: true, eventkey.RuleIDUnpaired: true,
}

// Explain gives every vector's key, with the event_id rule exactly when the
// key came from the id and a reason for hashing otherwise; ExplainFor agrees
// with DeriveFor on the preset vectors.
func TestExplainAgreesWithTheVectors(t *testing.T) {
	vectors, err := conformance.Vectors()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vectors {
		body, err := v.Body()
		if err != nil {
			t.Fatal(err)
		}
		header := http.Header{}
		for k, val := range v.Headers {
			header.Set(k, val)
		}
		e, err := eventkey.ExplainFor(eventkey.Preset(v.Preset), header, body, v.Scope)
		switch {
		case v.Error == "invalid_scope":
			if err == nil {
				t.Errorf("%s: ExplainFor accepted an invalid scope", v.Name)
			}
			continue
		case err != nil:
			t.Errorf("%s: %v", v.Name, err)
			continue
		case v.Error == "empty_body":
			if e.Rule != eventkey.RuleEmptyBody || e.Key.Value != "" {
				t.Errorf("%s: %+v, want the empty_body rule", v.Name, e)
			}
			continue
		}
		if e.Key.Value != v.Key || string(e.Key.Source) != v.Source || e.Sentence == "" {
			t.Errorf("%s: %q (%s) %q, want %q (%s) and a sentence", v.Name, e.Key.Value, e.Key.Source, e.Sentence, v.Key, v.Source)
		}
		switch v.Source {
		case "event_id":
			if e.Rule != eventkey.RuleEventID && e.Fallback != eventkey.RuleEventID {
				t.Errorf("%s: rule %s (fallback %s) for a key from the id", v.Name, e.Rule, e.Fallback)
			}
		case "provider_id":
			if e.Rule != eventkey.RuleProviderID {
				t.Errorf("%s: rule %s for a provider id", v.Name, e.Rule)
			}
		case "form":
			if e.Rule != eventkey.RuleForm {
				t.Errorf("%s: rule %s for a form's key", v.Name, e.Rule)
			}
		default:
			if v.Preset == "" && !hashRules[e.Rule] {
				t.Errorf("%s: rule %s is not a reason to hash", v.Name, e.Rule)
			}
		}
	}
}

func TestExplainSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		body string
		want eventkey.Rule
	}{
		{`{"id":"evt_1"}`, eventkey.RuleEventID},
		{"not json \xff", eventkey.RuleInvalidUTF8},
		{`{"id":"evt_1",}`, eventkey.RuleNotJSON},
		{`{"id":"evt_1"} trailing`, eventkey.RuleNotJSON},
		{`["evt_1"]`, eventkey.RuleNotObject},
		{`"evt_1"`, eventkey.RuleNotObject},
		{strings.Repeat("[", 1001) + strings.Repeat("]", 1001), eventkey.RuleTooDeep},
		{`{"a":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`, eventkey.RuleTooDeep},
		{`{"type":"ping"}`, eventkey.RuleNoID},
		{`{"id":42}`, eventkey.RuleIDNotString},
		{`{"id":null}`, eventkey.RuleIDNotString},
		{`{"id":""}`, eventkey.RuleIDEmpty},
		{`{"id":"` + strings.Repeat("a", 256) + `"}`, eventkey.RuleIDTooLong},
		{`{"id":"a\u0007b"}`, eventkey.RuleIDControl},
		{`{"id":"\ud800x"}`, eventkey.RuleIDUnpaired},
		{``, eventkey.RuleEmptyBody},
	} {
		if got := eventkey.Explain([]byte(tc.body)); got.Rule != tc.want {
			t.Errorf("%.60q: rule %s (%s), want %s", tc.body, got.Rule, got.Sentence, tc.want)
		}
	}
	h := http.Header{}
	e, _ := eventkey.ExplainFor(eventkey.PresetGitHub, h, []byte(`{"id":"evt_1"}`), "")
	if e.Rule != eventkey.RuleProviderNoID || e.Fallback != eventkey.RuleEventID || e.Key.Value != "evt:evt_1" {
		t.Errorf("github preset without its header: %+v", e)
	}
	h.Set("X-GitHub-Delivery", "d\x01")
	if e, _ := eventkey.ExplainFor(eventkey.PresetGitHub, h, []byte(`x`), ""); e.Rule != eventkey.RuleProviderBadID || e.Fallback != eventkey.RuleNotJSON {
		t.Errorf("github preset with an unusable header: %+v", e)
	}
}
