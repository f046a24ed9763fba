package rules_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/rules"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v4"
)

// base is a small valid rules file the bad files below change one line of.
const base = `version: 1
provider: stripe
entities:
  order: {table: orders, key: id, account: account, state: state}
checks:
  - {path: data.object, type: object, reject: no_data_object}
rules:
  - name: confirm
    on: [payment_intent.succeeded]
    entity: order
    id: data.object.metadata.order_id
    fields: {payment_intent: data.object.id, amount: data.object.amount}
    checks:
      - {field: amount, type: number, reject: missing_amount}
    match:
      - {field: amount, column: amount, compare: numeric, reject: amount_mismatch}
    transition: {from: [pending], to: confirmed, set: {payment_intent: payment_intent}}
    effect: "confirm:{order}:{payment_intent}"
    tasks:
      - {key: "notice:{order}", kind: notice, payload: {order: "{order}", amount: {column: amount}}}
`

// variant replaces the line of base that starts with old (after its
// indentation) by repl.
func variant(t *testing.T, old, repl string) string {
	t.Helper()
	lines := strings.Split(base, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimLeft(l, " "), old) {
			indent := l[:len(l)-len(strings.TrimLeft(l, " "))]
			lines[i] = indent + repl
			return strings.Join(lines, "\n")
		}
	}
	t.Fatalf("base has no line starting %q", old)
	return ""
}

func TestBaseAndPresetsParse(t *testing.T) {
	if _, err := rules.Parse("base.yaml", []byte(base)); err != nil {
		t.Fatalf("the test's base file: %v", err)
	}
	want := map[string][]string{
		"stripe-orders":            {"payment_intent.succeeded", "checkout.session.completed", "charge.refunded"},
		"stripe-subscriptions":     {"customer.subscription.created", "customer.subscription.updated", "customer.subscription.deleted", "invoice.paid"},
		"shopify-orders":           {"orders/paid", "orders/cancelled", "refunds/create"},
		"github-deployments":       {"deployment", "deployment_status"},
		"standardwebhooks-generic": {"invoice.created", "invoice.paid", "payment.succeeded", "invoice.voided"},
	}
	for _, name := range rules.PresetNames() {
		rs, err := rules.Preset(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(rs.Types(), want[name]) || rs.Domain == "" {
			t.Errorf("%s handles %v (domain %q), want %v", name, rs.Types(), rs.Domain, want[name])
		}
	}
	if len(want) != len(rules.PresetNames()) {
		t.Errorf("presets %v, want %d", rules.PresetNames(), len(want))
	}
}

func schema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	raw, err := os.ReadFile("effects.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("effects.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("effects.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// asJSON reads a YAML file as the JSON value it stands for.
func asJSON(t *testing.T, text string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(text), &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// Every preset, and the base file, is valid against the published schema.
func TestPresetsValidateAgainstSchema(t *testing.T) {
	s := schema(t)
	files := map[string]string{"base": base}
	for _, name := range rules.PresetNames() {
		b, err := rules.PresetFile(name)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(b)
	}
	for name, text := range files {
		if err := s.Validate(asJSON(t, text)); err != nil {
			t.Errorf("%s does not validate against effects.schema.json: %v", name, err)
		}
	}
}

// badFiles are refused by Parse and by the schema alike.
var badFiles = []struct {
	name, old, repl string
}{
	{"no version", "version:", "# no version"},
	{"version 2", "version:", "version: 2"},
	{"unknown provider", "provider:", "provider: paypal"},
	{"unknown top-level key", "provider:", "provider: stripe\nextras: 1"},
	{"table name with SQL", "order:", `order: {table: "orders; DROP TABLE x", key: id, state: state}`},
	{"reserved table name", "order:", "order: {table: order, key: id, state: state}"},
	{"upper-case column", "order:", "order: {table: orders, key: ID, state: state}"},
	{"entity without a state", "order:", "order: {table: orders, key: id}"},
	{"entity named account", "order:", "account: {table: orders, key: id, state: state}"},
	{"path with a quote", "id:", `id: "data.object.id') OR 1=1 --"`},
	{"path with an empty segment", "id:", "id: data..id"},
	{"path with a space", "id:", `id: "data.object.order id"`},
	{"template with a quote", "effect:", `effect: "confirm:{order}'||pg_sleep(1)||'"`},
	{"template with a space", "effect:", `effect: "confirm {order}"`},
	{"template placeholder with SQL", "effect:", `effect: "confirm:{order||pg_sleep(1)}"`},
	{"template without a placeholder", "effect:", `effect: "confirm"`},
	{"template with an open brace", "effect:", `effect: "confirm:{order"`},
	{"reason with a quote", "- {field: amount, type: number", `- {field: amount, type: number, reject: "missing'; DROP"}`},
	{"reason that is a built-in outcome", "- {field: amount, type: number", `- {field: amount, type: number, reject: applied}`},
	{"check with reject and ignore", "- {field: amount, type: number", `- {field: amount, type: number, reject: a, ignore: b}`},
	{"check without an outcome", "- {field: amount, type: number", `- {field: amount, type: number}`},
	{"check with field and path", "- {field: amount, type: number", `- {field: amount, path: data.x, reject: a}`},
	{"check with type and equals", "- {field: amount, type: number", `- {field: amount, type: number, equals: 5, reject: a}`},
	{"unknown JSON type", "- {field: amount, type: number", `- {field: amount, type: integer, reject: a}`},
	{"condition value with a line break", "- {field: amount, type: number", `- {field: amount, equals: "a\nb", reject: a}`},
	{"condition value with NUL", "- {field: amount, type: number", `- {field: amount, equals: "a\u0000b", reject: a}`},
	{"common check reading a field", "- {path: data.object", `- {field: amount, reject: missing_amount}`},
	{"unknown compare", "- {field: amount, column: amount", `- {field: amount, column: amount, compare: fuzzy, reject: amount_mismatch}`},
	{"ordering op on text", "- {field: amount, column: amount", `- {field: amount, column: amount, op: lt, reject: amount_mismatch}`},
	{"match column with SQL", "- {field: amount, column: amount", `- {field: amount, column: "amount;--", reject: amount_mismatch}`},
	{"state with a quote", "transition:", `transition: {from: ["pend'ing"], to: confirmed}`},
	{"to absent", "transition:", `transition: {from: [pending], to: absent}`},
	{"creating without a state", "transition:", `transition: {from: [absent]}`},
	{"transition without from", "transition:", `transition: {to: confirmed}`},
	{"set column with SQL", "transition:", `transition: {from: [pending], to: confirmed, set: {"x = 1; --": payment_intent}}`},
	{"rule without a name", "- name: confirm", "- nam: confirm"},
	{"rule name with upper case", "- name: confirm", "- name: Confirm"},
	{"event type with a quote", "on:", `on: ["payment'intent"]`},
	{"unknown rule key", "entity: order", "entity: order\n    priority: 1"},
	{"task kind with upper case", "- {key:", `- {key: "notice:{order}", kind: Notice}`},
	{"task key with a quote", "- {key:", `- {key: "notice'{order}", kind: notice}`},
	{"payload with both", "- {key:", `- {key: "notice:{order}", kind: notice, payload: {a: {column: amount, field: amount}}}`},
	{"payload text with a control character", "- {key:", "- {key: \"notice:{order}\", kind: notice, payload: {a: \"x\\u0007\"}}"},
	{"bad defer limit", "entity: order", "entity: order\n    defer_limit: soon"},
}

// The schema and Parse agree: each bad file is refused by both, for a
// reason within the schema's reach. (Parse refuses more: names that must
// exist, see TestParseRefusesWhatOnlyItCanTell.)
func TestSchemaAndParseAgree(t *testing.T) {
	s := schema(t)
	for _, b := range badFiles {
		t.Run(b.name, func(t *testing.T) {
			text := variant(t, b.old, b.repl)
			_, parseErr := rules.Parse("bad.yaml", []byte(text))
			schemaErr := s.Validate(asJSON(t, text))
			if parseErr == nil {
				t.Errorf("Parse accepted it:\n%s", text)
			}
			if schemaErr == nil {
				t.Errorf("the schema accepted it:\n%s", text)
			}
			if parseErr != nil {
				t.Logf("Parse: %v", parseErr)
			}
		})
	}
}

// What only Parse can tell: names that must exist, and are checked
// against each other.
func TestParseRefusesWhatOnlyItCanTell(t *testing.T) {
	s := schema(t)
	for _, c := range []struct{ name, old, repl, want string }{
		{"unknown entity", "entity: order", "entity: invoice", `no entity "invoice"`},
		{"unknown field in a check", "- {field: amount, type: number", "- {field: total, type: number, reject: missing_amount}", `no field "total"`},
		{"unknown placeholder", "effect:", `effect: "confirm:{order}:{charge}"`, `{charge} is not a field`},
		{"unknown field in set", "transition:", `transition: {from: [pending], to: confirmed, set: {payment_intent: pi}}`, `no field "pi"`},
		{"setting the state column", "transition:", `transition: {from: [pending], to: confirmed, set: {state: payment_intent}}`, `sets those itself`},
		{"waiting in a state it applies in", "transition:", `transition: {from: [pending], to: confirmed, defer: {pending: waits}}`, `cannot also wait in it`},
		{"a field named as the entity", "fields:", "fields: {order: data.object.id, payment_intent: data.object.id, amount: data.object.amount}", "placeholder of its own"},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := variant(t, c.old, c.repl)
			_, err := rules.Parse("bad.yaml", []byte(text))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Parse: %v; want an error containing %q", err, c.want)
			}
			if err := s.Validate(asJSON(t, text)); err != nil {
				t.Logf("(the schema refuses it too: %v)", err)
			}
		})
	}
}

// Every error names the file, the line and the field, in YAML and in
// JSON; a file with several problems reports them all.
func TestErrorsNameFileLineAndField(t *testing.T) {
	yamlFile := variant(t, "effect:", `effect: "confirm:{order}:{charge}"`)
	yamlFile = strings.Replace(yamlFile, "transition: {from: [pending]", "transition: {from: [\"pend'ing\"]", 1)
	json := `{
  "version": 1,
  "provider": "stripe",
  "entities": {
    "order": {"table": "orders", "key": "id", "state": "state"}
  },
  "rules": [
    {
      "name": "confirm",
      "on": ["payment_intent.succeeded"],
      "entity": "order",
      "id": "data.object.metadata.order_id",
      "fields": {"payment_intent": "data.object.id"},
      "transition": {
        "from": ["pending"],
        "to": "confirmed",
        "sett": {}
      },
      "effect": "confirm:{order}:{pi}"
    }
  ]
}`
	for _, c := range []struct {
		name, file, text string
		want             []string
	}{
		{"YAML", "effects.yaml", yamlFile, []string{
			`effects.yaml:17: rules[0].transition.from[0]: "pend'ing" is not a state`,
			`effects.yaml:18: rules[0].effect: template "confirm:{order}:{charge}": {charge} is not a field of this rule`,
		}},
		{"JSON", "effects.json", json, []string{
			`effects.json:17: rules[0].transition.sett: unknown key; the keys here are from, to, defer, reject, match, set`,
			`effects.json:19: rules[0].effect: template "confirm:{order}:{pi}": {pi} is not a field of this rule`,
		}},
		// The line where the parser found the mistake, and where the
		// construct it was in began (issue 41: an indentation mistake on
		// line 6 was reported on line 3, where its mapping began).
		{"YAML syntax", "effects.yaml", "version: 1\nrules: [\n  {name: a\n", []string{"effects.yaml:4: not valid YAML: did not find expected ',' or '}' (while parsing a flow mapping begun on line 3)"}},
		{"YAML indentation", "effects.yaml", "version: 1\nprovider: stripe\nentities:\n  order:\n    table: orders\n   key: id\n    state: state\n",
			[]string{"effects.yaml:6: not valid YAML: did not find expected key (while parsing a block mapping begun on line 4)"}},
		{"YAML indentation, deeper", "effects.yaml", "version: 1\nprovider: stripe\nentities:\n  order:\n    table: orders\n      key: id\n",
			[]string{"effects.yaml:6: not valid YAML: mapping values are not allowed in this context"}},
		{"JSON syntax", "effects.json", "{\n  \"version\": 1,\n  \"rules\": [}\n", []string{"effects.json:3: not valid JSON"}},
		{"wrong type", "effects.yaml", strings.Replace(base, "version: 1", "version: [1]", 1), []string{"effects.yaml:1: version: want 1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := rules.Parse(c.file, []byte(c.text))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("errors:\n%v\nwant one containing %q", err, w)
				}
			}
			var es rules.Errors
			var e *rules.Error
			if !errors.As(err, &es) && !errors.As(err, &e) {
				t.Errorf("%T is neither rules.Errors nor *rules.Error", err)
			}
		})
	}
}

// The same rules in YAML and in JSON compile to the same decision.
func TestYAMLAndJSONAreTheSameRules(t *testing.T) {
	for _, name := range rules.PresetNames() {
		src, _ := rules.PresetFile(name)
		var doc yaml.Node
		if err := yaml.Unmarshal(src, &doc); err != nil {
			t.Fatal(err)
		}
		var w strings.Builder
		writeJSON(&w, doc.Content[0], "")
		js := []byte(w.String())
		fromYAML, err := rules.Parse(name+".yaml", src)
		if err != nil {
			t.Fatal(err)
		}
		fromJSON, err := rules.Parse(name+".json", js)
		if err != nil {
			t.Fatalf("%s as JSON: %v", name, err)
		}
		a, _ := json.Marshal(fromYAML.Decision())
		b, _ := json.Marshal(fromJSON.Decision())
		if !bytes.Equal(a, b) {
			t.Errorf("%s: the YAML and JSON forms compile differently", name)
		}
	}
}

// writeJSON writes a YAML node as JSON, keys in the file's order and one
// member a line.
func writeJSON(b *strings.Builder, n *yaml.Node, indent string) {
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteString("{")
		for i := 0; i < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteString(",")
			}
			k, _ := json.Marshal(n.Content[i].Value)
			b.WriteString("\n" + indent + "  " + string(k) + ": ")
			writeJSON(b, n.Content[i+1], indent+"  ")
		}
		b.WriteString("\n" + indent + "}")
	case yaml.SequenceNode:
		b.WriteString("[")
		for i, c := range n.Content {
			if i > 0 {
				b.WriteString(", ")
			}
			writeJSON(b, c, indent)
		}
		b.WriteString("]")
	default:
		var v any
		n.Decode(&v)
		j, _ := json.Marshal(v)
		b.Write(j)
	}
}

// A sample file's errors name the file, line and field, as a rules
// file's do; a folder without samples is refused.
func TestSampleErrors(t *testing.T) {
	_, err := rules.ParseSample("s.yaml", []byte("event: {id: e}\nrows:\n  orders:\n    - {\"id; --\": 1}\nexpect:\n  state: done\n  outcome: applied\n"))
	for _, want := range []string{`s.yaml:4: rows.orders[0].id; --: invalid SQL identifier`, `s.yaml:6: expect.state: "done": a decision ends processed, ignored`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("errors %v; want one containing %q", err, want)
		}
	}
	if _, err := rules.ParseSample("s.json", []byte(`{"body": "x", "event": {}, "expect": {"state": "processed", "outcome": "applied"}}`)); err == nil ||
		!strings.Contains(err.Error(), "not both") {
		t.Errorf("event and body: %v", err)
	}
	if _, err := rules.LoadSamples(t.TempDir()); err == nil || !strings.Contains(err.Error(), "holds no sample") {
		t.Errorf("an empty folder: %v", err)
	}
}
