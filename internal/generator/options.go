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
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/idemhook/idemhook/internal/rules"
	"github.com/idemhook/idemhook/signature/provider"
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
	// not require crypto. See docs/modes.md#crypto-node for the clauses it cannot honour.
	HashingCryptoNode Hashing = "crypto-node"
	// HashingKeysvc sends the raw body to keysvc, which derives and
	// reserves the key (and holds the lease in GuardLease mode): no Code
	// node, no Crypto node, and one reservation table for many tools.
	HashingKeysvc Hashing = "keysvc"
	// HashingNode builds and reserves the key in one node, idemhook's
	// community node (n8n-nodes-idemhook's Idempotency Guard), with the
	// same key code as the Code node and the same statements, run in n8n's
	// own process: the fewest nodes per delivery. n8n must have the package
	// installed (docs/n8n-node.md); NodeType names how.
	HashingNode Hashing = "node"
)

// Guard chooses how the key is held while the business step runs.
type Guard string

const (
	// GuardLease, the default, records a state and a lease expiry: a retry
	// during a running attempt gets 409, a retry after the lease expired
	// takes over, a failed step releases the key. The example business step
	// writes its row and marks the key done in one statement
	// (pgsql.BusinessInsertDone), so it runs once whatever dies when.
	GuardLease Guard = "lease"
	// GuardAtMostOnce is the seed template, the default before lease: INSERT
	// … ON CONFLICT DO NOTHING, first sight wins, a release (DELETE) when the
	// business step fails. At most once: an attempt that dies before its
	// step commits keeps the key, and every retry is answered duplicate; a
	// retry during a running attempt is answered duplicate at once, and lost
	// if that attempt then fails.
	GuardAtMostOnce Guard = "at-most-once"
	// GuardTransactional reserves the key and runs the business write in one
	// SQL statement (pgsql.ReserveAndWrite): for business steps that are SQL
	// on the same database. Atomic, so no release branch and nothing lost on
	// a crash, and the fewest nodes.
	GuardTransactional Guard = "transactional"

	// guardReserveRenamed is GuardAtMostOnce's name until lease became the
	// default: refused with the new names, so that no script that wrote it
	// gets another guard without a word.
	guardReserveRenamed Guard = "reserve"
)

// Guards lists the guards, the default first.
var Guards = []Guard{GuardLease, GuardTransactional, GuardAtMostOnce}

// GuardChange says what moving a deployed workflow of guard from to guard
// to changes for its events: idemhook check and deploy say it of a live
// workflow that is another guard's.
func GuardChange(from, to Guard) string {
	var b strings.Builder
	switch {
	case from == GuardAtMostOnce && to == GuardLease:
		b.WriteString("These options give the lease guard, the default since at-most-once (then named reserve) stopped being it: a retry during a running attempt gets 409 instead of 200 duplicate, and an attempt that died is taken over after --lease instead of its event being lost.")
	case to == GuardAtMostOnce:
		b.WriteString("These options give the at-most-once guard: first sight wins, and an attempt that dies, or fails while a retry was answered duplicate, loses its event.")
	default:
		b.WriteString("These options give the " + string(to) + " guard.")
	}
	b.WriteString(" The guards: " + Docs + "modes.md#which-guard")
	return b.String()
}

// Pattern chooses what the generated files do with a delivery.
type Pattern string

const (
	// PatternReserve reserves the delivery's key and runs the business step
	// in the webhook's own execution (workflow.json).
	PatternReserve Pattern = "reserve"
	// PatternInbox saves the delivery in an inbox and answers 200 once it is
	// committed; a worker then decides the business effect in one
	// transaction, an outbox delivers external calls, and a recoverer
	// re-offers unfinished work (receiver-, worker-, recoverer- and
	// outbox-workflow.json).
	PatternInbox Pattern = "inbox"
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
	DefaultGuard          = GuardLease
	DefaultKeysvcURL      = "http://127.0.0.1:8080"
	// DefaultVerifyCredential names the n8n Crypto credential whose HMAC
	// secret is the provider's signing secret (--verify).
	DefaultVerifyCredential = "Webhook signing secret (idemhook)"
	DefaultTolerance        = 5 * time.Minute

	// Inbox pattern.
	DefaultInboxWebhookPath  = "webhook-inbox"
	DefaultInboxWorkflowName = "Webhook Inbox (idemhook)"
	DefaultAccount           = "default"
	DefaultDeferLimit        = 24 * time.Hour
	DefaultClaimLease        = 2 * time.Minute
	DefaultMaxAttempts       = 5
	DefaultSweepEvery        = time.Minute
	DefaultRetryBackoff      = 30 * time.Second
	DefaultOutboxMaxAttempts = 10
	DefaultOutboxBackoff     = 10 * time.Second
	DefaultOutboxTimeout     = 10 * time.Second
	DefaultOutboxBatch       = 20
	DefaultRecoverBatch      = 100
)

// DefaultEvents is the inbox pattern's default allowlist without --rules:
// the event types of the default rules preset, stripe-orders (a test keeps
// them equal). With --rules, the default is the types those rules handle.
var DefaultEvents = []string{"payment_intent.succeeded", "checkout.session.completed", "charge.refunded"}

// Options configure a generated workflow. The zero value of every field
// means its default. The fields of ReserveOptions apply to the reserve
// pattern only and those of InboxOptions to the inbox pattern only:
// Validate refuses the other pattern's, set, rather than ignore them.
type Options struct {
	// WebhookPath is the production URL path: /webhook/<path>.
	WebhookPath string
	// WorkflowName is the name shown in n8n; the cleanup workflow appends
	// " – cleanup".
	WorkflowName string
	// CredentialName is the n8n Postgres credential the nodes reference by
	// name; no credential id is ever written.
	CredentialName string
	// Retention is how long the cleanup workflow keeps keys. Keep it longer
	// than your provider may resend an event (Stripe: up to 30 days from its
	// CLI).
	Retention time.Duration
	// Hashing chooses the nodes that build the key. With the inbox pattern,
	// HashingNode has the community node save the receipt (the n8n
	// receiver only); any other mode builds it in a Code node.
	Hashing Hashing
	// NodeStore is where the community node reserves with HashingNode, and
	// so which package it is: NodeStorePostgres (n8n-nodes-idemhook-postgres,
	// self-hosted n8n, the default) or NodeStoreKeysvc (n8n-nodes-idemhook,
	// the package n8n can verify, which n8n Cloud installs). By default, the
	// store of NodeType's package when NodeType is set.
	NodeStore string
	// NodeType is the community node's type name with HashingNode: how n8n
	// loaded the package (its Type for a package installed in ~/.n8n/nodes,
	// the default; its CustomType for a folder in N8N_CUSTOM_EXTENSIONS).
	NodeType string
	// Verify names the provider whose signature is checked before the key
	// is reserved (stripe, github, shopify, slack; standardwebhooks only
	// where keysvc verifies: HashingKeysvc, or the inbox pattern with
	// ReceiverKeysvc). Empty: no check.
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

	// Pattern is PatternReserve (default) or PatternInbox. The inbox
	// pattern's Verify defaults to its rules' provider ("none" turns the
	// check off).
	Pattern Pattern
	ReserveOptions
	InboxOptions

	// Executions are the workflows' execution settings.
	Executions Executions
}

// ReserveOptions configure the reserve pattern: the guard that reserves
// the event's key before the business step.
type ReserveOptions struct {
	// EventsTable stores reserved keys; BusinessTable is the example
	// business step's table. Both accept "table" or "schema.table".
	EventsTable   string
	BusinessTable string
	Guard         Guard
	// Lease is how long an attempt holds the key in GuardLease mode; size it
	// above the business step's worst running time.
	Lease time.Duration
	// KeysvcURL is keysvc's base URL as n8n reaches it (HashingKeysvc).
	KeysvcURL string
	// KeysvcCredential, when set, names an n8n "Bearer Auth" credential
	// holding keysvc's token; the token itself is never in the workflow.
	KeysvcCredential string
}

// InboxOptions configure the inbox pattern: the receipt, the worker that
// decides each event by its rules, and the outbox.
type InboxOptions struct {
	// Receiver is who saves the receipt: ReceiverN8N (the receiver
	// workflow) or ReceiverKeysvc (keysvc's durable inbox, which forwards
	// each saved event to the target workflow).
	Receiver Receiver
	// Account is the receipt's account when the event names none (Stripe
	// Connect events carry "account").
	Account string
	// Rules are the effect rules the worker's decision function is
	// compiled from (package rules); nil: the stripe-orders preset.
	Rules *rules.Rules
	// Events is the allowlist of event types the worker acts on; any other
	// type is stored as ignored. Empty: every type Rules handle; else a
	// subset of them.
	Events []string
	// DeferLimit is how long an event whose transition is not allowed yet
	// (a refund before its payment) is retried before it becomes failed.
	DeferLimit time.Duration
	// ClaimLease is how long a worker holds an inbox row; the recoverer
	// re-offers rows left unfinished for longer.
	ClaimLease time.Duration
	// MaxAttempts bounds the claims of an event whose decision never
	// finishes or keeps failing (it is then failed).
	MaxAttempts int
	// RetryBackoff is the first delay before a deferred event, or one whose
	// decision failed, is offered again; doubled per attempt, at most 15
	// minutes.
	RetryBackoff time.Duration
	// DBSchema is the PostgreSQL schema of the pattern's tables and
	// functions; empty: the search_path default (public).
	DBSchema string
	// SweepEvery is the schedule of the recoverer and of the outbox
	// dispatcher: whole minutes, at most 24h.
	SweepEvery time.Duration
	// OutboxURL receives the outbox's calls: POST {url} with the task's
	// payload and Idempotency-Key, GET {url}/{operation_key} to reconcile.
	// Empty: no outbox workflow is written, and the tasks wait in
	// outbox_tasks (see Notes).
	OutboxURL string
	// OutboxCredential, when set, names an n8n "Bearer Auth" credential
	// for the outbox API.
	OutboxCredential  string
	OutboxMaxAttempts int
	// OutboxBackoff is the first retry delay, doubled per attempt (with
	// jitter) up to an hour.
	OutboxBackoff time.Duration
	OutboxTimeout time.Duration
	// OutboxBatch is how many tasks one dispatcher run claims.
	OutboxBatch int
}

// Receiver chooses who receives the provider's deliveries in the inbox
// pattern.
type Receiver string

const (
	ReceiverN8N    Receiver = "n8n"
	ReceiverKeysvc Receiver = "keysvc"
)

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

// WithDefaults returns o with every zero field set to the value the
// generated files use. The defaults of some options depend on others (the
// inbox pattern's --verify on its rules, --preset on --verify, --path on
// the pattern): the planner page reads them here rather than repeat the
// rules, to name the provider a choice implies and leave out of its
// command line what the generator does anyway.
func (o Options) WithDefaults() Options { return o.withDefaults() }

// withDefaults fills in the zero fields of the shared options and of the
// pattern's own; the other pattern's stay as they are, for resolve to
// refuse if set.
func (o Options) withDefaults() Options {
	if o.Pattern == "" {
		o.Pattern = PatternReserve
	}
	if o.Pattern == PatternInbox {
		setDefault(&o.WebhookPath, DefaultInboxWebhookPath)
		setDefault(&o.WorkflowName, DefaultInboxWorkflowName)
		o.InboxOptions = o.InboxOptions.withDefaults(&o.Verify)
	} else {
		o.ReserveOptions = o.ReserveOptions.withDefaults()
	}
	if o.Verify == "none" {
		o.Verify = ""
	}
	setDefault(&o.WebhookPath, DefaultWebhookPath)
	setDefault(&o.WorkflowName, DefaultWorkflowName)
	setDefault(&o.CredentialName, DefaultCredentialName)
	setDefault(&o.Retention, DefaultRetention)
	setDefault(&o.Hashing, HashingCodeNode)
	if o.Hashing == HashingNode && o.NodeStore == "" {
		o.NodeStore = NodeStorePostgres
		if p, ok := communitynode.OfType(o.NodeType); ok {
			o.NodeStore = p.Store
		}
	}
	if p, ok := nodePackage(o.NodeStore); ok {
		setDefault(&o.NodeType, p.Type())
	}
	setDefault(&o.VerifyCredential, DefaultVerifyCredential)
	setDefault(&o.Preset, o.Verify)
	setDefault(&o.Tolerance, DefaultTolerance)
	return o
}

func (o ReserveOptions) withDefaults() ReserveOptions {
	setDefault(&o.EventsTable, DefaultEventsTable)
	setDefault(&o.BusinessTable, DefaultBusinessTable)
	setDefault(&o.Guard, DefaultGuard)
	setDefault(&o.Lease, DefaultLease)
	setDefault(&o.KeysvcURL, DefaultKeysvcURL)
	return o
}

// withDefaults fills in the inbox options, and verify, whose default is
// the rules' provider.
func (o InboxOptions) withDefaults(verify *string) InboxOptions {
	if o.Rules == nil {
		// The preset is embedded and tested: it always parses.
		o.Rules, _ = rules.Preset(rules.DefaultPreset)
	}
	rulesProvider := provider.Stripe
	if o.Rules != nil {
		rulesProvider = o.Rules.Provider.Verify
	}
	setDefault(verify, rulesProvider)
	// n8n cannot check every provider's signature (see Validate): keysvc's
	// inbox receives for those.
	if p, ok := provider.Lookup(*verify); ok && o.Receiver == "" && p.WorkflowCannot != "" {
		o.Receiver = ReceiverKeysvc
	}
	setDefault(&o.Receiver, ReceiverN8N)
	setDefault(&o.Account, DefaultAccount)
	if len(o.Events) == 0 {
		o.Events = DefaultEvents
		if o.Rules != nil {
			o.Events = o.Rules.Types()
		}
	}
	setDefault(&o.DeferLimit, DefaultDeferLimit)
	setDefault(&o.ClaimLease, DefaultClaimLease)
	setDefault(&o.SweepEvery, DefaultSweepEvery)
	setDefault(&o.RetryBackoff, DefaultRetryBackoff)
	setDefault(&o.OutboxBackoff, DefaultOutboxBackoff)
	setDefault(&o.OutboxTimeout, DefaultOutboxTimeout)
	setDefault(&o.MaxAttempts, DefaultMaxAttempts)
	setDefault(&o.OutboxMaxAttempts, DefaultOutboxMaxAttempts)
	setDefault(&o.OutboxBatch, DefaultOutboxBatch)
	return o
}

// setDefault sets a zero *v to def.
func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
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
	inbox            pgsql.Inbox
	// byExecution: the reservation records the n8n execution that holds
	// the key (the guard `idemhook guard` puts into a user's workflow).
	byExecution bool
}

// The community node's stores (Options.NodeStore).
const (
	NodeStorePostgres = "postgres"
	NodeStoreKeysvc   = "keysvc"
)

// DefaultNodeKeysvcCredential names the keysvc store's credential (the
// package's own type, communitynode.KeysvcCredential) when
// KeysvcCredential is not set.
const DefaultNodeKeysvcCredential = "idemhook keysvc"

// DefaultKeysvcCredential names the keysvc mode's Bearer Auth credential
// when KeysvcCredential is not set and keysvc is not on loopback.
const DefaultKeysvcCredential = "keysvc token"

// keysvcCredentialOf is the credential the workflow calls keysvc with: the
// one named; "none" for none; by default the node's own credential type,
// and for the keysvc mode's HTTP Request nodes a Bearer Auth credential
// unless keysvc is on loopback, where it may run without tokens (keysvc
// refuses to serve any other address without one).
func keysvcCredentialOf(o Options) string {
	switch {
	case o.KeysvcCredential == "none":
		return ""
	case o.KeysvcCredential != "":
		return o.KeysvcCredential
	case o.Hashing == HashingNode:
		return DefaultNodeKeysvcCredential
	case o.Hashing == HashingKeysvc && !loopbackURL(o.KeysvcURL):
		return DefaultKeysvcCredential
	}
	return ""
}

// loopbackURL reports whether u's host is this machine's loopback.
func loopbackURL(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	// 127.0.0.0/8, ::1 or localhost: written out, where net's parser would
	// weigh on the planner page's module.
	host := p.Hostname()
	return host == "localhost" || host == "::1" || strings.HasPrefix(host, "127.") && strings.Trim(host, "0123456789.") == ""
}

// nodePackage is the package whose node reserves in store.
func nodePackage(store string) (communitynode.Package, bool) {
	for _, p := range communitynode.Packages {
		if p.Store == store {
			return p, true
		}
	}
	return communitynode.Package{}, false
}

// nodeOnKeysvc: the community node reserves through keysvc.
func (r *resolved) nodeOnKeysvc() bool {
	return r.Hashing == HashingNode && r.NodeStore == NodeStoreKeysvc
}

// KeysInKeysvc reports whether keysvc holds the guard's keys (HashingKeysvc,
// or the community node on keysvc): they are in keysvc's own store, which
// keysvc prunes after its --retention, so the files hold no events table
// and no cleanup workflow. NodeStore may still be unset: it is read as
// withDefaults reads it.
func (o Options) KeysInKeysvc() bool {
	if o.Pattern == PatternInbox {
		return false
	}
	store := o.NodeStore
	if store == "" {
		if p, ok := communitynode.OfType(o.NodeType); ok {
			store = p.Store
		}
	}
	return o.Hashing == HashingKeysvc || (o.Hashing == HashingNode && store == NodeStoreKeysvc)
}

// nodePackageName is the community node's package (HashingNode).
func (r *resolved) nodePackageName() string {
	p, _ := nodePackage(r.NodeStore)
	return p.Name
}

// resolve checks o, fills in its defaults and resolves what its pattern's
// files are built from. Every error is an *OptionError.
func (o Options) resolve() (resolved, error) {
	if err := o.checkPatternGroup(); err != nil {
		return resolved{}, err
	}
	if err := o.checkNodeChoice(); err != nil {
		return resolved{}, err
	}
	if o.KeysInKeysvc() && o.Retention != 0 {
		return resolved{}, optionError("retention", o.Retention.String(), "keysvc keeps the keys in its own store and prunes them itself: give keysvc its --retention (no cleanup workflow is written in this mode)")
	}
	o = o.withDefaults()
	for _, check := range []func() error{o.checkNames, o.checkHashing, o.checkVerify, o.checkPreset, o.Executions.check} {
		if err := check(); err != nil {
			return resolved{}, err
		}
	}
	r := resolved{Options: o}
	r.WebhookPath = strings.TrimPrefix(o.WebhookPath, "/")
	switch o.Pattern {
	case PatternReserve:
		return resolveReserve(r)
	case PatternInbox:
		return resolveInbox(r)
	default:
		return resolved{}, optionError("pattern", string(o.Pattern), "use reserve or inbox")
	}
}

// optionError is the *OptionError refusing option's value for reason.
func optionError(option, value, reason string) error {
	return &OptionError{Option: option, Value: value, Reason: reason}
}

// checkNodeChoice refuses a node store or type, which choose the community
// node, without --hashing node.
func (o Options) checkNodeChoice() error {
	if (o.NodeStore != "" || o.NodeType != "") && o.Hashing != HashingNode {
		option, value := "node store", o.NodeStore
		if o.NodeStore == "" {
			option, value = "node type", o.NodeType
		}
		return optionError(option, value, "it chooses the community node: use it with --hashing node")
	}
	return nil
}

// checkNames checks the names the files give n8n (the webhook path, the
// workflow's and the credential's names) and the keys' retention.
func (o Options) checkNames() error {
	p := strings.TrimPrefix(o.WebhookPath, "/")
	if !pathPattern.MatchString(p) || len(p) > 200 {
		return optionError("webhook path", o.WebhookPath, "use letters, digits, '-' and '_' in '/'-separated segments, at most 200 characters")
	}
	if !oneLine(o.WorkflowName, true) {
		return optionError("workflow name", o.WorkflowName, "must be 1-128 characters on one line")
	}
	if !oneLine(o.CredentialName, true) {
		return optionError("credential name", o.CredentialName, "must be 1-128 characters on one line")
	}
	if o.Retention < time.Hour || o.Retention%time.Second != 0 {
		return optionError("retention", o.Retention.String(), "must be at least 1h, in whole seconds (default 30 days)")
	}
	return nil
}

// checkHashing checks the hashing mode and, with the community node, its
// store and its type.
func (o Options) checkHashing() error {
	switch o.Hashing {
	case HashingCodeNode, HashingCryptoNode, HashingKeysvc, HashingNode:
	default:
		return optionError("hashing mode", string(o.Hashing), "use code-node, crypto-node, keysvc or node")
	}
	if o.Hashing == HashingNode {
		pkg, ok := nodePackage(o.NodeStore)
		if !ok {
			return optionError("node store", o.NodeStore, "use "+NodeStorePostgres+" (n8n-nodes-idemhook-postgres, self-hosted n8n) or "+NodeStoreKeysvc+" (n8n-nodes-idemhook, which n8n Cloud can install)")
		}
		if o.NodeType != pkg.Type() && o.NodeType != pkg.CustomType() {
			return optionError("node type", o.NodeType, "the "+o.NodeStore+" store's node is "+pkg.Type()+" (the package "+pkg.Name+" installed in ~/.n8n/nodes, from n8n's UI or npm) or "+pkg.CustomType()+" (a folder in N8N_CUSTOM_EXTENSIONS)")
		}
	}
	return nil
}

// checkVerify checks the signature check: a provider the chosen mode can
// verify, its credential's name and the timestamps' tolerance.
func (o Options) checkVerify() error {
	if o.Verify != "" {
		p, ok := provider.Lookup(o.Verify)
		if !ok {
			return optionError("verify provider", o.Verify, "use "+provider.List())
		}
		// keysvc verifies in the keysvc mode and as the inbox's receiver.
		keysvcVerifies := o.Hashing == HashingKeysvc || (o.Pattern == PatternInbox && o.Receiver == ReceiverKeysvc)
		if p.WorkflowCannot != "" && !keysvcVerifies {
			return optionError("verify provider", o.Verify, p.WorkflowCannot+": use --hashing keysvc, or --pattern inbox --receiver keysvc")
		}
	}
	if !oneLine(o.VerifyCredential, true) {
		return optionError("verify credential", o.VerifyCredential, "must be 1-128 characters on one line")
	}
	if o.Tolerance < time.Second || o.Tolerance > time.Hour || o.Tolerance%time.Second != 0 {
		return optionError("tolerance", o.Tolerance.String(), "must be between 1s and 1h, in whole seconds (default 5m)")
	}
	return nil
}

// checkPreset checks the key's preset, one the hashing mode can read, and
// its scope.
func (o Options) checkPreset() error {
	preset, err := eventkey.ParsePreset(o.Preset)
	if err != nil {
		return optionError("preset", o.Preset, "use "+provider.List())
	}
	if err := preset.CheckScope(o.Scope); err != nil {
		return optionError("scope", o.Scope, err.Error())
	}
	if o.Hashing == HashingCryptoNode && preset != eventkey.PresetDefault && preset != eventkey.PresetStripe {
		return optionError("preset", o.Preset, "the crypto-node mode reads only the body's id: use --hashing code-node or keysvc for this preset")
	}
	return nil
}

// checkPatternGroup refuses an option of the other pattern, set: ignoring
// it would generate something else than the caller asked for. The command
// line refuses its flag before (CheckApplies); this is the library's.
func (o Options) checkPatternGroup() error {
	pattern, other, group := o.Pattern, PatternInbox, any(o.InboxOptions)
	if pattern == "" {
		pattern = PatternReserve
	}
	if pattern == PatternInbox {
		other, group = PatternReserve, o.ReserveOptions
	}
	v := reflect.ValueOf(group)
	field, ok := firstSetField(v)
	if !ok {
		return nil
	}
	value := fmt.Sprint(v.FieldByIndex(field.Index).Interface())
	if field.Type.Kind() == reflect.Pointer {
		value = "set"
	}
	option := v.Type().Name() + "." + field.Name
	for _, flag := range Flags {
		if flag.Pattern == other && flag.field == field.Name {
			option = flag.Option
		}
	}
	return &OptionError{Option: option, Value: value,
		Reason: fmt.Sprintf("applies to the %s pattern only (this is the %s pattern)", other, pattern)}
}

// firstSetField returns the first field of the struct group that is not
// its zero value: what the flags' probe and the pattern check both look for.
func firstSetField(group reflect.Value) (reflect.StructField, bool) {
	for i := range group.NumField() {
		if !group.Field(i).IsZero() {
			return group.Type().Field(i), true
		}
	}
	return reflect.StructField{}, false
}

func resolveReserve(r resolved) (resolved, error) {
	o := r.Options
	bad := func(option, value, reason string) (resolved, error) {
		return resolved{}, &OptionError{Option: option, Value: value, Reason: reason}
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
	if !plainHTTPURL(o.KeysvcURL) {
		return bad("keysvc URL", o.KeysvcURL, "use http(s)://host[:port][/prefix] with no credentials, query or fragment")
	}
	r.KeysvcURL = strings.TrimSuffix(o.KeysvcURL, "/")
	if !oneLine(o.KeysvcCredential, false) {
		return bad("keysvc credential", o.KeysvcCredential, "must be at most 128 characters on one line")
	}
	r.KeysvcCredential = keysvcCredentialOf(o)
	if o.Hashing == HashingNode && o.NodeStore == NodeStoreKeysvc && r.KeysvcCredential == "" {
		return bad("keysvc credential", o.KeysvcCredential, "the Idempotency Guard calls keysvc with a credential of its own: name one, or leave the default")
	}
	switch o.Guard {
	case GuardLease, GuardAtMostOnce:
	case guardReserveRenamed:
		return bad("guard mode", string(o.Guard), "reserve is now named at-most-once (first sight wins: an attempt that dies loses its event), and the default is lease, which loses none: leave --guard out, or write --guard at-most-once to keep the old behaviour (CHANGELOG.md)")
	case GuardTransactional:
		if o.Hashing == HashingKeysvc || o.Hashing == HashingNode {
			return bad("guard mode", string(o.Guard), string(o.Hashing)+" reserves in its own statement: the transactional guard needs the reservation and the business write in one, with --hashing code-node or crypto-node")
		}
	default:
		return bad("guard mode", string(o.Guard), "use lease, transactional or at-most-once")
	}
	if o.Lease < 5*time.Second || o.Lease > 24*time.Hour || o.Lease%time.Second != 0 {
		return bad("lease", o.Lease.String(), "must be between 5s and 24h, in whole seconds")
	}
	return r, nil
}

// eventTypePattern matches provider event types such as
// "payment_intent.succeeded" or Shopify's "orders/paid"; no comma, which
// separates the allowlist.
var eventTypePattern = regexp.MustCompile(`^[A-Za-z0-9_.:/-]{1,100}$`)

// resolveInbox checks the inbox pattern's options and resolves its
// schema and outbox URL.
func resolveInbox(r resolved) (resolved, error) {
	o := r.Options
	for _, check := range []func() error{o.checkInboxReceiver, o.checkInboxEvents, o.checkInboxSchema, o.checkInboxLimits, o.checkOutbox} {
		if err := check(); err != nil {
			return resolved{}, err
		}
	}
	r.inbox = pgsql.Inbox{Schema: o.DBSchema}
	r.OutboxURL = strings.TrimSuffix(o.OutboxURL, "/")
	return r, nil
}

// checkInboxReceiver checks the receiver and the hashing mode that saves
// its receipt: a Code node or, in n8n's receiver, the community node on
// PostgreSQL.
func (o Options) checkInboxReceiver() error {
	switch o.Receiver {
	case ReceiverN8N, ReceiverKeysvc:
	default:
		return optionError("receiver", string(o.Receiver), "use n8n or keysvc")
	}
	switch {
	case o.Hashing == HashingCodeNode:
	case o.Hashing == HashingNode && o.Receiver == ReceiverN8N && o.NodeStore == NodeStoreKeysvc:
		return optionError("node store", o.NodeStore, "the community node saves the inbox's receipt in PostgreSQL: use --node-store postgres (keysvc has an inbox of its own: --receiver keysvc)")
	case o.Hashing == HashingNode && o.Receiver == ReceiverN8N:
	case o.Hashing == HashingNode:
		return optionError("hashing mode", string(o.Hashing), "keysvc saves the receipt with --receiver keysvc: leave --hashing out")
	default:
		return optionError("hashing mode", string(o.Hashing), "the inbox pattern saves its receipt with a Code node (code-node) or the community node (node)")
	}
	return nil
}

// checkInboxEvents checks the default account, that there are rules, and
// that the allowlist holds distinct event types the rules handle.
func (o Options) checkInboxEvents() error {
	if !eventkey.ValidID(o.Account) {
		return optionError("account", o.Account, "must be 1-255 bytes of UTF-8 with no control character")
	}
	if o.Rules == nil {
		return optionError("rules", "", "no rules: name a preset or a rules file")
	}
	seen := map[string]bool{}
	handled := o.Rules.Types()
	for _, e := range o.Events {
		if !eventTypePattern.MatchString(e) || seen[e] {
			return optionError("events", strings.Join(o.Events, ","), fmt.Sprintf("%q: give distinct event types of letters, digits, '.', '_', ':', '/' and '-'", e))
		}
		if !slices.Contains(handled, e) {
			return optionError("events", strings.Join(o.Events, ","), fmt.Sprintf("the rules (%s) have no rule for %q: the allowlist must be a subset of the types they handle (%s); leave --events out to allow them all",
				o.Rules.Source, e, strings.Join(handled, ",")))
		}
		seen[e] = true
	}
	return nil
}

// checkInboxSchema checks the database schema: an unqualified identifier.
func (o Options) checkInboxSchema() error {
	if o.DBSchema != "" {
		t, err := pgsql.ParseTable(o.DBSchema)
		if err != nil || t.Schema != "" {
			return optionError("database schema", o.DBSchema, "a lower-case identifier that is not a reserved word")
		}
	}
	return nil
}

// checkInboxLimits checks the worker's, recoverer's and outbox's durations
// and counts against their bounds, and that n8n's schedule can run the
// sweep interval.
func (o Options) checkInboxLimits() error {
	durations := []struct {
		name     string
		d        time.Duration
		min, max time.Duration
		unit     time.Duration
	}{
		{"defer limit", o.DeferLimit, time.Minute, 30 * 24 * time.Hour, time.Second},
		{"claim lease", o.ClaimLease, 5 * time.Second, time.Hour, time.Second},
		{"sweep interval", o.SweepEvery, time.Minute, 24 * time.Hour, time.Minute},
		{"retry backoff", o.RetryBackoff, 100 * time.Millisecond, 15 * time.Minute, time.Millisecond},
		{"outbox backoff", o.OutboxBackoff, 100 * time.Millisecond, time.Hour, time.Millisecond},
		{"outbox timeout", o.OutboxTimeout, time.Second, 5 * time.Minute, time.Second},
	}
	for _, d := range durations {
		if d.d < d.min || d.d > d.max || d.d%d.unit != 0 {
			return optionError(d.name, d.d.String(), fmt.Sprintf("must be between %s and %s, in whole %s", d.min, d.max, unitName(d.unit)))
		}
	}
	ints := []struct {
		name     string
		n        int
		min, max int
	}{
		{"max attempts", o.MaxAttempts, 1, 100},
		{"outbox max attempts", o.OutboxMaxAttempts, 1, 100},
		{"outbox batch", o.OutboxBatch, 1, 500},
	}
	for _, n := range ints {
		if n.n < n.min || n.n > n.max {
			return optionError(n.name, fmt.Sprint(n.n), fmt.Sprintf("must be between %d and %d", n.min, n.max))
		}
	}
	// n8n's schedule takes 1-59 minutes, 1-23 hours or whole days.
	if (o.SweepEvery >= time.Hour && o.SweepEvery%time.Hour != 0) || (o.SweepEvery > time.Hour && o.SweepEvery < 24*time.Hour && o.SweepEvery%time.Hour != 0) {
		return optionError("sweep interval", o.SweepEvery.String(), "use whole minutes below an hour, whole hours below a day, or 24h")
	}
	return nil
}

// checkOutbox checks the outbox's API URL and credential; a credential
// needs a URL.
func (o Options) checkOutbox() error {
	if o.OutboxURL == "" {
		if o.OutboxCredential != "" {
			return optionError("outbox credential", o.OutboxCredential, "the outbox calls an API only with --outbox-url")
		}
		return nil
	}
	if !plainHTTPURL(o.OutboxURL) {
		return optionError("outbox URL", o.OutboxURL, "use http(s)://host[:port][/path] with no credentials, query or fragment")
	}
	if !oneLine(o.OutboxCredential, false) {
		return optionError("outbox credential", o.OutboxCredential, "must be at most 128 characters on one line")
	}
	return nil
}

// plainHTTPURL: http or https, a host, and no credentials, query or
// fragment (the workflow appends paths to it).
func plainHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil && u.RawQuery == "" && u.Fragment == ""
}

// oneLine: at most 128 characters on one line, not blank when required
// (n8n's names of workflows and credentials).
func oneLine(s string, required bool) bool {
	return (!required || strings.TrimSpace(s) != "") && len(s) <= 128 && !strings.ContainsAny(s, "\x00\r\n")
}

func unitName(d time.Duration) string {
	switch d {
	case time.Minute:
		return "minutes"
	case time.Millisecond:
		return "milliseconds"
	}
	return "seconds"
}

func identReason(err error) string {
	var ie *pgsql.IdentifierError
	if errors.As(err, &ie) {
		return ie.Reason
	}
	return err.Error()
}
