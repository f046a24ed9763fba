package keysvc_test

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/signature"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"
)

// Stripe sends one event, with one id, to every endpoint subscribed to it:
// two tenants sharing keysvc each hold their own key for it, whatever the
// preset and whether the key is derived or their own, while a token of no
// tenant keeps the spec's key as it was. A tenant sees the spec's keys
// (keysvc keeps the prefix to itself), and completes, releases and looks up
// only its own.
func TestTenantsHaveTheirOwnKeySpace(t *testing.T) {
	const (
		single = "single-tenant-token-0123"
		shopA  = "shop-a-guard-token-0123"
		shopB  = "shop-b-guard-token-0123"
	)
	tokens, err := keysvc.ParseTokens(strings.NewReader(tokenLine("ops", "admin", single, "") +
		tokenLine("shop-a", "guard", shopA, "shopA:") + tokenLine("shop-b", "admin", shopB, "shopB:")))
	if err != nil {
		t.Fatal(err)
	}
	forEachStore(t, func(t *testing.T, store keysvc.Store) {
		c := start(t, keysvc.Config{Store: store, Tokens: tokens})
		event := []byte(`{"id":"evt_shared_1","type":"payment_intent.succeeded"}`)
		for _, token := range []string{single, shopA, shopB} {
			r := c.as(token).do("POST", "/v1/reservations", event, nil)
			r.want(t, 201, "")
			if r.str("key") != "evt:evt_shared_1" {
				t.Errorf("reserved %q, want the spec's key", r.str("key"))
			}
			c.as(token).do("POST", "/v1/reservations", event, nil).want(t, 200, "")
		}
		// Where the store holds them: the single tenant's key as it was.
		for _, key := range []string{"evt:evt_shared_1", "shopA:evt:evt_shared_1", "shopB:evt:evt_shared_1"} {
			if _, err := store.Lookup(t.Context(), key); err != nil {
				t.Errorf("the store has no %s: %v", key, err)
			}
		}
		// A header preset, a lease and a key of the caller's own, in a
		// tenant's space too.
		gh := map[string]string{"X-GitHub-Delivery": "d-1"}
		r := c.as(shopA).do("POST", "/v1/reservations?preset=github&lease=60s", []byte(`{}`), gh)
		r.want(t, 201, "")
		if r.str("key") != "gh::d-1" {
			t.Errorf("a github delivery of shop A: %q", r.str("key"))
		}
		c.as(shopA).do("POST", "/v1/reservations?preset=github&lease=60s", []byte(`{}`), gh).want(t, 409, "in_progress")
		c.as(shopB).do("POST", "/v1/reservations?preset=github&lease=60s", []byte(`{}`), gh).want(t, 201, "")
		own := map[string]string{keysvc.KeyHeader: "order-7"}
		c.as(shopA).do("POST", "/v1/reservations", nil, own).want(t, 201, "")
		c.as(shopB).do("POST", "/v1/reservations", nil, own).want(t, 201, "")

		// Shop B completes, releases and looks up in its own space: shop
		// A's lease stays held, its event key stays reserved.
		ghKey := "/v1/reservations/" + url.PathEscape("gh::d-1")
		c.as(shopB).do("POST", ghKey+"/done", nil, nil).want(t, 200, "")
		c.as(shopA).do("POST", "/v1/reservations?preset=github&lease=60s", []byte(`{}`), gh).want(t, 409, "in_progress")
		c.as(shopB).do("DELETE", "/v1/reservations/"+url.PathEscape("evt:evt_shared_1"), nil, nil).want(t, 204, "")
		c.as(shopA).do("POST", "/v1/reservations", event, nil).want(t, 200, "")
		c.as(shopB).do("POST", "/v1/reservations", event, nil).want(t, 201, "")
		// Another tenant's stored key, named whole, is not found: it is
		// looked for in the caller's space.
		c.as(shopB).do("GET", "/v1/reservations/"+url.PathEscape("shopA:evt:evt_shared_1"), nil, nil).want(t, 404, "not_found")
		c.as(shopB).do("DELETE", "/v1/reservations/"+url.PathEscape("shopA:gh::d-1"), nil, nil).want(t, 404, "not_found")
		got := c.as(shopB).do("GET", ghKey, nil, nil)
		got.want(t, 200, "")
		if got.str("key") != "gh::d-1" || got.str("state") != "done" {
			t.Errorf("shop B's look-up: %s", got.body)
		}
		c.as(shopA).do("POST", ghKey+"/done", nil, nil).want(t, 200, "")
	})
}

// A token bound to a provider reserves only deliveries whose signature
// keysvc verified, never a key the caller names: a leaked token cannot
// pre-reserve a real event id.
func TestProviderBoundToken(t *testing.T) {
	const tok = "stripe-only-token-0123"
	tokens, err := keysvc.ParseTokens(strings.NewReader(tokenLine("stripe-hook", "guard", tok, "provider=stripe")))
	if err != nil {
		t.Fatal(err)
	}
	c := start(t, keysvc.Config{Store: newBoltStore(t), Tokens: tokens,
		Secrets: map[signature.Provider][]string{signature.ProviderStripe: {"whsec_bound"}}}).as(tok)
	body := []byte(`{"id":"evt_bound_1"}`)
	c.do("POST", "/v1/reservations", body, nil).want(t, 403, "provider_bound")
	c.do("POST", "/v1/reservations?provider=github", body, nil).want(t, 403, "provider_bound")
	c.do("POST", "/v1/reservations?provider=stripe", body, nil).want(t, 401, "")
	signed := map[string]string{"Stripe-Signature": stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{
		Payload: body, Secret: "whsec_bound", Timestamp: time.Now()}).Header}
	withKey := map[string]string{"Stripe-Signature": signed["Stripe-Signature"], keysvc.KeyHeader: "evt:evt_real_event"}
	c.do("POST", "/v1/reservations?provider=stripe", body, withKey).want(t, 403, "provider_bound")
	r := c.do("POST", "/v1/reservations?provider=stripe", body, signed)
	r.want(t, 201, "")
	if r.str("key") != "evt:evt_bound_1" {
		t.Errorf("reserved %q", r.str("key"))
	}
	who := c.do("GET", "/v1/token", nil, nil)
	who.want(t, 200, "")
	if who.str("provider") != "stripe" || who.str("scope") != "guard" || who.str("name") != "stripe-hook" {
		t.Errorf("GET /v1/token: %s", who.body)
	}
}

// GET /v1/token says who the token is; ?scope= says what it lacks, which
// the node's credential test shows.
func TestTokenRouteNamesTheMissingScope(t *testing.T) {
	tokens, err := keysvc.ParseTokens(strings.NewReader(tokenLine("viewer", "read", "read-tok-0123", "") + tokenLine("shop", "guard", "guard-tok-0123", "shop:")))
	if err != nil {
		t.Fatal(err)
	}
	c := start(t, keysvc.Config{Store: newBoltStore(t), Tokens: tokens})
	r := c.as("read-tok-0123").do("GET", "/v1/token?scope=guard", nil, nil)
	r.want(t, 403, "forbidden")
	if !strings.Contains(r.str("error"), "has the read scope") || !strings.Contains(r.str("error"), "the guard scope (or admin)") {
		t.Errorf("the 403 does not say what the token has and needs: %s", r.body)
	}
	c.as("read-tok-0123").do("GET", "/v1/token?scope=owner", nil, nil).want(t, 400, "invalid_scope")
	who := c.as("guard-tok-0123").do("GET", "/v1/token?scope=guard", nil, nil)
	who.want(t, 200, "")
	if who.str("scope") != "guard" || who.str("tenant_prefix") != "shop:" {
		t.Errorf("GET /v1/token: %s", who.body)
	}
	c.as("not-a-token").do("GET", "/v1/token", nil, nil).want(t, 401, "unauthorized")
	// A route a token's scope does not allow says what it needs.
	r = c.as("guard-tok-0123").do("POST", "/v1/keys", []byte(`{"id":"x"}`), nil)
	r.want(t, 403, "forbidden")
	if !strings.Contains(r.str("error"), "has the guard scope; this needs the reserve scope (or admin)") {
		t.Errorf("POST /v1/keys with a guard token: %s", r.body)
	}
}

// A tokens file line pasted from sha256sum's output ("HASH  -") is refused
// with its line number, not read as the key prefix "-".
func TestTokensFileRefusesSha256sumsDash(t *testing.T) {
	_, err := keysvc.ParseTokens(strings.NewReader("# tokens\n" + tokenLine("ok", "guard", "a", "") + tokenLine("pasted", "guard", "b", "-")))
	if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "cut -d' ' -f1") {
		t.Errorf("a pasted sha256sum line: %v", err)
	}
}

// Before tenants had key spaces of their own (keysvc up to d7d3529), a
// tenant's token reserved only keys that began with its prefix, and the
// store kept them as sent: Idempotency-Key "shop-a:evt_1" was the key
// "shop-a:evt_1". After the upgrade the same requests must reach those
// reservations (issue 61: main answered 201 and stored
// "shop-a:shop-a:evt_1", so a provider's retry of an old event ran its step
// again): a key that already carries the token's prefix is the key it was,
// for reserving, leasing, looking up, completing and releasing; the
// tenant's key named without the prefix is the same reservation.
func TestTenantKeysFromBeforeTheUpgrade(t *testing.T) {
	const (
		ops    = "ops-admin-token-0123"
		guard  = "shop-a-guard-token-0123"
		reader = "shop-a-reserve-token-0123"
	)
	tokens, err := keysvc.ParseTokens(strings.NewReader(tokenLine("ops", "admin", ops, "") +
		tokenLine("shop-a-guard", "guard", guard, "shop-a:") + tokenLine("shop-a-reserve", "reserve", reader, "shop-a:")))
	if err != nil {
		t.Fatal(err)
	}
	path := func(key string) string { return "/v1/reservations/" + url.PathEscape(key) }
	named := func(key string) map[string]string { return map[string]string{keysvc.KeyHeader: key} }
	forEachStore(t, func(t *testing.T, store keysvc.Store) {
		ctx := t.Context()
		// What the previous keysvc stored for shop A: a reservation and a
		// lease still held, each under the key as the tenant sent it.
		if _, reserved, err := store.Reserve(ctx, "shop-a:evt_old_1"); err != nil || !reserved {
			t.Fatalf("seed: %v %v", reserved, err)
		}
		if _, outcome, err := store.AcquireLease(ctx, "shop-a:evt_old_2", time.Minute); err != nil || outcome != keysvc.Acquired {
			t.Fatalf("seed lease: %v %v", outcome, err)
		}
		c := start(t, keysvc.Config{Store: store, Tokens: tokens})

		// The provider's retry of the old event, as the old client sends it:
		// a duplicate, answered with the key as named.
		r := c.as(guard).do("POST", "/v1/reservations", nil, named("shop-a:evt_old_1"))
		r.want(t, 200, "")
		if r.str("key") != "shop-a:evt_old_1" || r.json["reserved"] != false {
			t.Errorf("the old event's retry: %s", r.body)
		}
		// The same key named without the prefix is the same reservation.
		c.as(guard).do("POST", "/v1/reservations", nil, named("evt_old_1")).want(t, 200, "")
		got := c.as(reader).do("GET", path("shop-a:evt_old_1"), nil, nil)
		got.want(t, 200, "")
		if got.str("key") != "shop-a:evt_old_1" || got.str("state") != "done" {
			t.Errorf("the old reservation looked up: %s", got.body)
		}
		c.as(reader).do("GET", path("evt_old_1"), nil, nil).want(t, 200, "")

		// The lease the old keysvc granted is held, completed by its key,
		// and done after.
		c.as(guard).do("POST", "/v1/reservations?lease=60s", nil, named("shop-a:evt_old_2")).want(t, 409, "in_progress")
		c.as(guard).do("POST", path("shop-a:evt_old_2")+"/done", nil, nil).want(t, 200, "")
		c.as(guard).do("POST", "/v1/reservations?lease=60s", nil, named("evt_old_2")).want(t, 200, "")

		// Released by its old name, the event is new again, under either.
		c.as(guard).do("DELETE", path("shop-a:evt_old_1"), nil, nil).want(t, 204, "")
		c.as(guard).do("POST", "/v1/reservations", nil, named("evt_old_1")).want(t, 201, "")
		c.as(guard).do("POST", "/v1/reservations", nil, named("shop-a:evt_old_1")).want(t, 200, "")

		// A key named with the prefix today is stored once with it, where
		// the previous keysvc (and a downgrade back to it) has it, and
		// where a token of no tenant sees it.
		c.as(guard).do("POST", "/v1/reservations", nil, named("shop-a:evt_new_1")).want(t, 201, "")
		c.as(ops).do("GET", path("shop-a:evt_new_1"), nil, nil).want(t, 200, "")
		if _, err := store.Lookup(ctx, "shop-a:shop-a:evt_new_1"); !errors.Is(err, keysvc.ErrNotFound) {
			t.Errorf("the prefix was added to a key that carried it: %v", err)
		}
		// Derived keys stay in the tenant's space, as before this change.
		body := []byte(`{"id":"evt_derived_1"}`)
		c.as(guard).do("POST", "/v1/reservations", body, nil).want(t, 201, "")
		if _, err := store.Lookup(ctx, "shop-a:evt:evt_derived_1"); err != nil {
			t.Errorf("a derived key is not in the tenant's space: %v", err)
		}
		c.as(ops).do("POST", "/v1/reservations", body, nil).want(t, 201, "")
	})
}

// 96ddca3 stored a key a tenant named with its prefix with the prefix twice
// ("shop-a:shop-a:evt_1"), where this keysvc no longer looks. CHANGELOG.md's
// statements, run as written (the table's name put in), move each to where
// keysvc looks now, keep the one already there when both exist, and touch
// no other tenant's key; then the tenant's requests find them.
func TestTenantKeysStoredTwiceMoved(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	changelog, err := os.ReadFile(filepath.Join("..", "..", "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(changelog), "<!-- TestTenantKeysStoredTwiceMoved runs this block as written -->\n```sql\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("CHANGELOG.md has no block for TestTenantKeysStoredTwiceMoved")
	}
	store := newPGStore(t)
	ctx := t.Context()
	for _, key := range []string{"shop-a:shop-a:evt_twice_1", "shop-a:shop-a:evt_twice_2", "shop-a:evt_twice_2", "shop-a:evt_once", "shop-b:shop-b:evt_b"} {
		if _, reserved, err := store.Reserve(ctx, key); err != nil || !reserved {
			t.Fatalf("seed %s: %v %v", key, reserved, err)
		}
	}
	if _, err := pg.Business.Exec(ctx, strings.ReplaceAll(block, "processed_events", store.Table())); err != nil {
		t.Fatalf("the documented statements: %v", err)
	}
	for key, want := range map[string]error{"shop-a:evt_twice_1": nil, "shop-a:evt_twice_2": nil, "shop-a:evt_once": nil, "shop-b:shop-b:evt_b": nil,
		"shop-a:shop-a:evt_twice_1": keysvc.ErrNotFound, "shop-a:shop-a:evt_twice_2": keysvc.ErrNotFound} {
		if _, err := store.Lookup(ctx, key); !errors.Is(err, want) && err != want {
			t.Errorf("%s after the statements: %v, want %v", key, err, want)
		}
	}
	tokens, err := keysvc.ParseTokens(strings.NewReader(tokenLine("shop-a", "guard", "shop-a-moved-0123", "shop-a:")))
	if err != nil {
		t.Fatal(err)
	}
	c := start(t, keysvc.Config{Store: store, Tokens: tokens}).as("shop-a-moved-0123")
	for _, key := range []string{"shop-a:evt_twice_1", "evt_twice_1", "shop-a:evt_twice_2"} {
		c.do("POST", "/v1/reservations", nil, map[string]string{keysvc.KeyHeader: key}).want(t, 200, "")
	}
}
