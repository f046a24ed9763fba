package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/rules"
)

// The sample folders shipped for each preset pass `rules test`, which
// writes a JUnit report of them.
func TestRulesTestExamplesPass(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL; not run with -short")
	}
	for _, preset := range rules.PresetNames() {
		t.Run(preset, func(t *testing.T) {
			report := filepath.Join(t.TempDir(), "junit.xml")
			code, stdout, stderr := runCLI("", "rules", "test", "--rules", preset, "--report", report, filepath.Join("..", "..", "internal", "rules", "testdata", "examples", preset))
			if code != exitOK || !strings.Contains(stdout, " passed, 0 failed") {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			junit, err := os.ReadFile(report)
			if err != nil || !strings.Contains(string(junit), `failures="0"`) || strings.Count(string(junit), "<testcase ") < 8 {
				t.Errorf("the report: %v\n%s", err, junit)
			}
			t.Logf("\n%s", stdout)
		})
	}
}

// One expected decision changed in a copy of the folder: `rules test`
// fails (exit 1), naming the sample and the difference.
func TestRulesTestFailsOnAChangedDecision(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL; not run with -short")
	}
	src := filepath.Join("..", "..", "internal", "rules", "testdata", "examples", "stripe-orders")
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "05-refund-before-payment.yaml" {
			changed := strings.Replace(string(b), "outcome: order_not_confirmed", "outcome: applied", 1)
			if changed == string(b) {
				t.Fatal("the sample to change no longer says order_not_confirmed")
			}
			b = []byte(strings.Replace(changed, "state: deferred", "state: processed", 1))
		}
		os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
	}
	report := filepath.Join(t.TempDir(), "junit.xml")
	code, stdout, stderr := runCLI("", "rules", "test", "--rules", "stripe-orders", "--report", report, dir)
	if code != exitFail {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, exitFail, stdout, stderr)
	}
	for _, want := range []string{"FAIL  05-refund-before-payment.yaml", "decision deferred/order_not_confirmed, want processed/applied", "1 failed"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the table lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "1 of 12 samples decided otherwise") {
		t.Errorf("stderr: %s", stderr)
	}
	if junit, _ := os.ReadFile(report); !strings.Contains(string(junit), `failures="1"`) || !strings.Contains(string(junit), `<failure message="deferred/order_not_confirmed`) {
		t.Errorf("the report does not name the failure:\n%s", junit)
	}
}

// rules init writes a preset to start from, which parses as the preset;
// it never overwrites a file.
func TestRulesInit(t *testing.T) {
	code, stdout, stderr := runCLI("", "rules", "init", "--preset", "stripe-subscriptions")
	want, _ := rules.PresetFile("stripe-subscriptions")
	if code != exitOK || stdout != string(want) {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	file := filepath.Join(t.TempDir(), "effects.yaml")
	if code, _, stderr := runCLI("", "rules", "init", "--preset", "stripe-orders", "--out", file); code != exitOK {
		t.Fatalf("--out: exit %d: %s", code, stderr)
	}
	if code, stdout, _ := runCLI("", "rules", "check", "--rules", file); code != exitOK || !strings.Contains(stdout, "payment_intent.succeeded, checkout.session.completed, charge.refunded") {
		t.Errorf("rules check of the written file: exit %d: %s", code, stdout)
	}
	if code, _, stderr := runCLI("", "rules", "init", "--preset", "stripe-orders", "--out", file); code == exitOK || !strings.Contains(stderr, "exists") {
		t.Errorf("a second init over the file: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI("", "rules", "init", "--preset", "paypal"); code != exitUsage || !strings.Contains(stderr, "stripe-orders, stripe-subscriptions") {
		t.Errorf("an unknown preset: exit %d: %s", code, stderr)
	}
	if code, stdout, _ := runCLI("", "rules", "schema"); code != exitOK || !strings.Contains(stdout, `"title": "idemhook effect rules"`) {
		t.Errorf("rules schema: exit %d", code)
	}
}

// generate --rules FILE compiles a user's own rules: its tables are not
// created (they exist), an injection attempt is refused with the file,
// line and field, and --events must stay within the rules' types.
func TestGenerateWithRulesFile(t *testing.T) {
	dir := t.TempDir()
	src, _ := rules.PresetFile("stripe-orders")
	own := strings.ReplaceAll(string(src), "table: orders", "table: shop.purchases")
	file := filepath.Join(dir, "effects.yaml")
	os.WriteFile(file, []byte(own), 0o644)
	out := filepath.Join(dir, "out")
	if code, _, stderr := runCLI("", "generate", "--out", out, "--pattern", "inbox", "--rules", file); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	schema, _ := os.ReadFile(filepath.Join(out, "schema.sql"))
	if strings.Contains(string(schema), "CREATE TABLE IF NOT EXISTS orders") || strings.Contains(string(schema), "CREATE TABLE IF NOT EXISTS shop.purchases") ||
		!strings.Contains(string(schema), "FROM shop.purchases WHERE id = k_order") {
		t.Errorf("schema.sql creates the user's table, or does not read it")
	}
	for _, c := range []struct{ name, old, repl, want string }{
		{"a table", "table: orders", `table: "orders; DROP TABLE x"`, "effects.yaml:10: entities.order.table: invalid SQL identifier"},
		{"a template", `effect: "confirm_order:{order}:{payment_intent}"`, `effect: "confirm_order:{order}'; DROP TABLE orders; --"`, "effects.yaml:46: rules[0].effect: key template"},
		{"a path", "payment_intent: data.object.id", `payment_intent: "data.object.id' || pg_sleep(5) || '"`, "effects.yaml:28: rules[0].fields.payment_intent: path"},
	} {
		bad := strings.Replace(string(src), c.old, c.repl, 1)
		os.WriteFile(file, []byte(bad), 0o644)
		code, _, stderr := runCLI("", "generate", "--out", filepath.Join(dir, "bad"), "--pattern", "inbox", "--rules", file)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("SQL through %s: exit %d: %s; want exit 2 naming %q", c.name, code, stderr, c.want)
		}
	}
	code, _, stderr := runCLI("", "generate", "--out", filepath.Join(dir, "sub"), "--pattern", "inbox", "--rules", "stripe-subscriptions", "--events", "invoice.paid,charge.refunded")
	if code != exitUsage || !strings.Contains(stderr, `no rule for "charge.refunded"`) {
		t.Errorf("an allowlist wider than the rules: exit %d: %s", code, stderr)
	}
}
