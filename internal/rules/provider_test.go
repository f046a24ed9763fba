package rules

import (
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/pgsql"
)

// A provider whose event type is a header (as Shopify's and GitHub's are)
// is an entry in providers, not a change to the rules: the compiled
// function reads the type from the stored headers, Evaluate from the
// request's, and the rules file only names the provider.
func TestProviderWithTheTypeInAHeader(t *testing.T) {
	saved := providers
	t.Cleanup(func() { providers = saved })
	providers = append(providers, Provider{Name: "example", Type: Source{Header: "X-Example-Topic"}, Account: Source{Header: "X-Example-Shop"}, Verify: "shopify"})
	src := `version: 1
provider: example
entities:
  order: {table: orders, key: id, account: account, state: state}
rules:
  - name: paid
    on: [orders-paid]
    entity: order
    id: id
    transition: {from: [pending], to: paid}
    effect: "paid:{order}"
`
	rs, err := Parse("example.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	d := rs.Decision()
	if d.TypeHeader != "x-example-topic" {
		t.Errorf("the decision reads the type from %q", d.TypeHeader)
	}
	ddl, err := pgsql.Inbox{}.DDL(d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ddl, "v_type := coalesce(ev.headers ->> 'x-example-topic', '');") {
		t.Error("the compiled function does not read the type from the stored headers")
	}
	ev := rs.Evaluate(Event{Body: []byte(`{"id": 42}`), Headers: map[string]string{"x-example-topic": "orders-paid", "x-example-shop": "shop-1"}}, nil)
	if ev.Type != "orders-paid" || ev.Account != "shop-1" || ev.EffectKey != "paid:42" {
		t.Errorf("Evaluate: type %q, account %q, effect %q; want orders-paid, shop-1, paid:42", ev.Type, ev.Account, ev.EffectKey)
	}
}
