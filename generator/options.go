// Package generator emits importable n8n 2.x workflows that make a webhook
// safe to retry: the delivery's idempotency key (docs/key-spec.md) is
// reserved once in PostgreSQL before the business step runs, and a replay is
// answered "200 duplicate" without running it again.
//
// The output is a pure function of Options: the same options give the same
// bytes, including the workflow id, node ids and webhookId, so re-importing a
// regenerated workflow updates it in place.
package generator

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/pgsql"
	"github.com/idemhook/idemhook/signature"
)

// Hashing chooses the n8n nodes that build the key.
type Hashing string

const (
	// HashingCodeNode builds the key in a Code node running
	// templates/code-node/idempotency-key.js. It follows the key spec for
	// every body, but needs NODE_FUNCTION_ALLOW_BUILTIN=crypto.
	HashingCodeNode Hashing = "code-node"
	// HashingCryptoNode hashes with n8n's Crypto node and reads the id from
	// n8n's parsed body in a Set node, for instances where the Code node may
	// not require crypto. See the README for the clauses it cannot honour.
	HashingCryptoNode Hashing = "crypto-node"
	// HashingKeysvc sends the raw body to keysvc, which derives and
	// reserves the key (and holds the lease in GuardLease mode): no Code
	// node, no Crypto node, and one reservation table for many tools.
	HashingKeysvc Hashing = "keysvc"
)

// Guard chooses how the key is held while the business step runs.
type Guard string

const (
	// GuardReserve is the seed template: INSERT … ON CONFLICT DO NOTHING, a
	// release (DELETE) when the business step fails.
	GuardReserve Guard = "reserve"
	// GuardLease records a state and a lease expiry: a retry during a running
	// attempt gets 409, a retry after the lease expired takes over.
	GuardLease Guard = "lease"
)

// Defaults of Options.
const (
	DefaultWebhookPath    = "idempotent-webhook"
	DefaultWorkflowName   = "Idempotent Webhook (idemhook)"
	DefaultEventsTable    = "processed_events"
	DefaultBusinessTable  = "business_log"
	DefaultCredentialName = "Postgres (idemhook)"
	DefaultRetention      = 30 * 24 * time.Hour
	DefaultLease          = 5 * time.Minute
	DefaultKeysvcURL      = "http://127.0.0.1:8080"
	// DefaultVerifyCredential names the n8n Crypto credential whose HMAC
	// secret is the provider's signing secret (--verify).
	DefaultVerifyCredential = "Webhook signing secret (idemhook)"
	DefaultTolerance        = 5 * time.Minute
)

// Options configure a generated workflow. The zero value of every field
// means its default.
type Options struct {
	// WebhookPath is the production URL path: /webhook/<path>.
	WebhookPath string
	// WorkflowName is the name shown in n8n; the cleanup workflow appends
	// " – cleanup".
	WorkflowName string
	// EventsTable stores reserved keys; BusinessTable is the example
	// business step's table. Both accept "table" or "schema.table".
	EventsTable   string
	BusinessTable string
	// CredentialName is the n8n Postgres credential the nodes reference by
	// name; no credential id is ever written.
	CredentialName string
	// Retention is how long the cleanup workflow keeps keys. Keep it longer
	// than your provider may resend an event (Stripe: up to 30 days from its
	// CLI).
	Retention time.Duration
	Hashing   Hashing
	Guard     Guard
	// Lease is how long an attempt holds the key in GuardLease mode; size it
	// above the business step's worst running time.
	Lease time.Duration
	// KeysvcURL is keysvc's base URL as n8n reaches it (HashingKeysvc).
	KeysvcURL string
	// KeysvcCredential, when set, names an n8n "Bearer Auth" credential
	// holding keysvc's token; the token itself is never in the workflow.
	KeysvcCredential string
	// Verify names the provider whose signature is checked before the key
	// is reserved (stripe, github, shopify, slack; standardwebhooks with
	// HashingKeysvc only). Empty: no check.
	Verify string
	// VerifyCredential names the n8n Crypto credential holding the signing
	// secret (encrypted by n8n; never in the workflow).
	VerifyCredential string
	// Tolerance bounds signed timestamps, both ways. Default 5m.
	Tolerance time.Duration
	// Preset picks where the event id is read (docs/key-spec.md, "Provider
	// presets"); it defaults to Verify's provider. Scope prefixes a preset's
	// key.
	Preset string
	Scope  string
}

// OptionError reports an invalid option. Every error of Validate is one.
type OptionError struct {
	Option string
	Value  string
	Reason string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("invalid %s %q: %s", e.Option, e.Value, e.Reason)
}

// webhook paths are URL path segments n8n serves under /webhook/.
var pathPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+(/[A-Za-z0-9_-]+)*$`)

// withDefaults fills in zero fields.
func (o Options) withDefaults() Options {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&o.WebhookPath, DefaultWebhookPath)
	def(&o.WorkflowName, DefaultWorkflowName)
	def(&o.EventsTable, DefaultEventsTable)
	def(&o.BusinessTable, DefaultBusinessTable)
	def(&o.CredentialName, DefaultCredentialName)
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.Hashing == "" {
		o.Hashing = HashingCodeNode
	}
	if o.Guard == "" {
		o.Guard = GuardReserve
	}
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	def(&o.KeysvcURL, DefaultKeysvcURL)
	def(&o.VerifyCredential, DefaultVerifyCredential)
	def(&o.Preset, o.Verify)
	if o.Tolerance == 0 {
		o.Tolerance = DefaultTolerance
	}
	return o
}

// Validate reports the first invalid option as an *OptionError.
func (o Options) Validate() error {
	_, err := o.resolve()
	return err
}

// resolved options: defaults applied, tables parsed.
type resolved struct {
	Options
	events, business pgsql.Table
}

func (o Options) resolve() (resolved, error) {
	o = o.withDefaults()
	r := resolved{Options: o}
	bad := func(option, value, reason string) (resolved, error) {
		return resolved{}, &OptionError{Option: option, Value: value, Reason: reason}
	}
	p := strings.TrimPrefix(o.WebhookPath, "/")
	if !pathPattern.MatchString(p) || len(p) > 200 {
		return bad("webhook path", o.WebhookPath, "use letters, digits, '-' and '_' in '/'-separated segments, at most 200 characters")
	}
	r.WebhookPath = p
	if strings.TrimSpace(o.WorkflowName) == "" || len(o.WorkflowName) > 128 || strings.ContainsAny(o.WorkflowName, "\x00\r\n") {
		return bad("workflow name", o.WorkflowName, "must be 1-128 characters on one line")
	}
	if strings.TrimSpace(o.CredentialName) == "" || len(o.CredentialName) > 128 || strings.ContainsAny(o.CredentialName, "\x00\r\n") {
		return bad("credential name", o.CredentialName, "must be 1-128 characters on one line")
	}
	var err error
	if r.events, err = pgsql.ParseTable(o.EventsTable); err != nil {
		return bad("events table", o.EventsTable, identReason(err))
	}
	if r.business, err = pgsql.ParseTable(o.BusinessTable); err != nil {
		return bad("business table", o.BusinessTable, identReason(err))
	}
	if r.events == r.business {
		return bad("business table", o.BusinessTable, "must differ from the events table")
	}
	if o.Retention < time.Hour || o.Retention%time.Second != 0 {
		return bad("retention", o.Retention.String(), "must be at least 1h, in whole seconds (default 30 days)")
	}
	switch o.Hashing {
	case HashingCodeNode, HashingCryptoNode, HashingKeysvc:
	default:
		return bad("hashing mode", string(o.Hashing), "use code-node, crypto-node or keysvc")
	}
	u, err := url.Parse(o.KeysvcURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return bad("keysvc URL", o.KeysvcURL, "use http(s)://host[:port][/prefix] with no credentials, query or fragment")
	}
	r.KeysvcURL = strings.TrimSuffix(o.KeysvcURL, "/")
	if len(o.KeysvcCredential) > 128 || strings.ContainsAny(o.KeysvcCredential, "\x00\r\n") {
		return bad("keysvc credential", o.KeysvcCredential, "must be at most 128 characters on one line")
	}
	if o.Verify != "" {
		p, err := signature.ParseProvider(o.Verify)
		if err != nil {
			return bad("verify provider", o.Verify, "use stripe, standardwebhooks, github, shopify or slack")
		}
		if p == signature.ProviderStandardWebhooks && o.Hashing != HashingKeysvc {
			return bad("verify provider", o.Verify, "Standard Webhooks signs with a binary key that n8n's Crypto credential cannot hold: use --hashing keysvc")
		}
	}
	if strings.TrimSpace(o.VerifyCredential) == "" || len(o.VerifyCredential) > 128 || strings.ContainsAny(o.VerifyCredential, "\x00\r\n") {
		return bad("verify credential", o.VerifyCredential, "must be 1-128 characters on one line")
	}
	if o.Tolerance < time.Second || o.Tolerance > time.Hour || o.Tolerance%time.Second != 0 {
		return bad("tolerance", o.Tolerance.String(), "must be between 1s and 1h, in whole seconds (default 5m)")
	}
	preset, err := eventkey.ParsePreset(o.Preset)
	if err != nil {
		return bad("preset", o.Preset, "use stripe, standardwebhooks, github, shopify or slack")
	}
	if err := preset.CheckScope(o.Scope); err != nil {
		return bad("scope", o.Scope, err.Error())
	}
	if o.Hashing == HashingCryptoNode && preset != eventkey.PresetDefault && preset != eventkey.PresetStripe {
		return bad("preset", o.Preset, "the crypto-node mode reads only the body's id: use --hashing code-node or keysvc for this preset")
	}
	switch o.Guard {
	case GuardReserve, GuardLease:
	default:
		return bad("guard mode", string(o.Guard), "use reserve or lease")
	}
	if o.Lease < 5*time.Second || o.Lease > 24*time.Hour || o.Lease%time.Second != 0 {
		return bad("lease", o.Lease.String(), "must be between 5s and 24h, in whole seconds")
	}
	return r, nil
}

func identReason(err error) string {
	var ie *pgsql.IdentifierError
	if errors.As(err, &ie) {
		return ie.Reason
	}
	return err.Error()
}
