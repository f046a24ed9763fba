package inbox_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/internal/keysvc/inbox/inboxtest"
	"github.com/idemhook/idemhook/internal/sandbox"
	"github.com/idemhook/idemhook/signature"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pg is a real PostgreSQL 16 for the whole package (nil with -short).
var pg *sandbox.Stack

func TestMain(m *testing.M) { sandbox.RunWithPostgres(m, "keysvc/inbox", &pg) }

const inboxSecret = "whsec_inboxTestSecret"

// openInbox opens and starts an inbox on the test PostgreSQL in a schema of
// its own (dropped at the end) with the endpoints file's endpoints.
func openInbox(t *testing.T, schema, endpoints string, opts inbox.Options) *inbox.Inbox {
	t.Helper()
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	return openInboxOn(t, pg.Business, schema, endpoints, opts)
}

// openInboxOn is openInbox on pool.
func openInboxOn(t *testing.T, pool *pgxpool.Pool, schema, endpoints string, opts inbox.Options) *inbox.Inbox {
	t.Helper()
	return inboxtest.Open(t, pool, schema, endpoints, map[signature.Provider][]string{signature.ProviderStripe: {inboxSecret}}, opts)
}

// receive saves body as a delivery to endpoint (whose signature keysvc
// would have verified) and returns its inbox id.
func receive(t *testing.T, in *inbox.Inbox, endpoint string, body string) int64 {
	t.Helper()
	e, ok := in.Endpoint(endpoint)
	if !ok {
		t.Fatalf("no endpoint %q", endpoint)
	}
	r, err := in.Receive(context.Background(), e, http.Header{"Content-Type": {"application/json"}}, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if r.InboxID == 0 {
		t.Fatalf("receive %s: %+v, want a new entry", body, r)
	}
	return r.InboxID
}
