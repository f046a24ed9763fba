package eventkey_test

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/idemhook/idemhook/eventkey"
)

// A delivery's body in, its key and the clause of the key spec that made it
// out: the same key on every retry of the event, whatever else changed.
func ExampleDerive() {
	for _, body := range []string{
		`{"id":"evt_1QyExample","type":"invoice.paid","created":1765000000}`,
		// A retry: the same event, its fields in another order.
		`{"created":1765000000,"type":"invoice.paid","id":"evt_1QyExample"}`,
		// No id: the bytes themselves are the event (the SHA-256 that
		// `printf '%s' '{"type":"ping"}' | sha256sum` prints).
		`{"type":"ping"}`,
	} {
		k, err := eventkey.Derive([]byte(body))
		if err != nil {
			panic(err)
		}
		fmt.Println(k.Value, k.Source)
	}
	_, err := eventkey.Derive(nil)
	fmt.Println(errors.Is(err, eventkey.ErrEmptyBody))
	// Output:
	// evt:evt_1QyExample event_id
	// evt:evt_1QyExample event_id
	// sha256:cdeb977b07509618335ceaa57b4b76fe3ec9c72f50102f74dcfbab92228ec6fb body_sha256
	// true
}

// A preset reads the id where its provider puts it: GitHub's delivery
// header, scoped by the hook that sent it, so that two hooks' deliveries
// never share a key.
func ExampleDeriveFor() {
	h := http.Header{}
	h.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	h.Set("X-GitHub-Hook-ID", "292430182")
	body := []byte(`{"action":"created","deployment":{"id":1}}`)

	p, err := eventkey.ParsePreset("github")
	if err != nil {
		panic(err)
	}
	k, err := eventkey.DeriveFor(p, h, body, "")
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Headers())
	fmt.Println(k.Value, k.Source)

	// Without the header, the spec's own clauses decide.
	k, _ = eventkey.DeriveFor(p, http.Header{}, []byte(`{"id":"42"}`), "")
	fmt.Println(k.Value, k.Source)
	// Output:
	// [X-Github-Delivery X-Github-Hook-Id]
	// gh:292430182:72d3162e-cc78-11e3-81ab-4c9367dc0958 provider_id
	// evt:42 event_id
}
