package generator

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/idemhook/idemhook/internal/duration"
	"github.com/idemhook/idemhook/internal/rules"
)

// Flag is one option of `idemhook generate`, spelled the same way wherever
// it is offered: the CLI registers its flags from Flags and the planner page
// builds its form from them, so both read a value identically and the page's
// files equal the CLI's.
type Flag struct {
	// Name is the flag without dashes: "path".
	Name string
	// Option is the name an *OptionError gives this option: "webhook path".
	Option string
	// Usage is the help text; a `QUOTED` word names the value.
	Usage string
	// Default is the value used when none is given, as text ("" when the
	// default depends on other options; Usage says which).
	Default string
	// Choices lists the accepted values of an enumeration.
	Choices []string
	// Pattern is the one pattern the option applies to ("" for both):
	// CheckApplies refuses it with the other. It is where the option's
	// field is: in ReserveOptions, InboxOptions, or neither.
	Pattern Pattern
	// field is the option's field in its group ("Guard" for
	// ReserveOptions.Guard), "" for a shared option.
	field string
	set   func(o *Options, v string) error
}

// Set parses v into o.
func (f Flag) Set(o *Options, v string) error { return f.set(o, v) }

// errZero refuses an empty or zero value where the options read empty or
// zero as "the default": given on purpose, it would be replaced without a
// word (--retention 0 would keep keys 30 days, --credential "" would name
// the default credential).
var errZero = errors.New("empty or zero would mean the default: give a value, or leave the option out for its default")

// text sets an option whose empty value is its "none" (no scope, the
// search_path, n8n's setting), as leaving it out is.
func text(field func(*Options) *string) func(*Options, string) error {
	return func(o *Options, v string) error { *field(o) = v; return nil }
}

// nonEmpty sets an option that has a default: an empty value is refused.
func nonEmpty[T ~string](field func(*Options) *T) func(*Options, string) error {
	return func(o *Options, v string) error {
		if strings.TrimSpace(v) == "" {
			return errZero
		}
		*field(o) = T(v)
		return nil
	}
}

func durationOf(field func(*Options) *time.Duration) func(*Options, string) error {
	return func(o *Options, v string) error {
		d, err := duration.Parse(v)
		if err == nil && d == 0 {
			err = errZero
		}
		*field(o) = d
		return err
	}
}

func integer(field func(*Options) *int) func(*Options, string) error {
	return func(o *Options, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return errors.New("want a whole number")
		}
		if n == 0 {
			return errZero
		}
		*field(o) = n
		return nil
	}
}

// Flags lists every option of `idemhook generate`, in the order help shows.
var Flags = []Flag{
	{Name: "pattern", Option: "pattern", Default: string(PatternReserve), Choices: []string{string(PatternReserve), string(PatternInbox)},
		Usage: "what the files do with a delivery, a `PATTERN`: reserve (workflow.json) or inbox (receiver, worker, recoverer and outbox workflows)",
		set:   nonEmpty(func(o *Options) *Pattern { return &o.Pattern })},
	{Name: "path", Option: "webhook path",
		Usage: "webhook path: the production URL is /webhook/`PATH` (default " + DefaultWebhookPath + "; " + DefaultInboxWebhookPath + " with --pattern inbox)",
		set:   nonEmpty(func(o *Options) *string { return &o.WebhookPath })},
	{Name: "name", Option: "workflow name",
		Usage: "workflow `NAME` shown in n8n (default \"" + DefaultWorkflowName + "\"; \"" + DefaultInboxWorkflowName + "\" with --pattern inbox)",
		set:   nonEmpty(func(o *Options) *string { return &o.WorkflowName })},
	{Name: "credential", Option: "credential name", Default: DefaultCredentialName,
		Usage: "`NAME` of the n8n Postgres credential the nodes use",
		set:   nonEmpty(func(o *Options) *string { return &o.CredentialName })},
	{Name: "retention", Option: "retention", Default: "30d",
		Usage: "how long cleanup keeps keys (or finished inbox work), a `DURATION` such as 30d or 720h",
		set:   durationOf(func(o *Options) *time.Duration { return &o.Retention })},
	{Name: "verify", Option: "verify provider",
		Usage: "check this `PROVIDER`'s signature first: stripe, github, shopify, slack (standardwebhooks with --hashing keysvc or --receiver keysvc); none to skip (the inbox pattern verifies stripe by default)",
		set:   nonEmpty(func(o *Options) *string { return &o.Verify })},
	{Name: "verify-credential", Option: "verify credential", Default: DefaultVerifyCredential,
		Usage: "`NAME` of the n8n Crypto credential whose HMAC secret is the signing secret",
		set:   nonEmpty(func(o *Options) *string { return &o.VerifyCredential })},
	{Name: "tolerance", Option: "tolerance", Default: "5m",
		Usage: "how far a signed timestamp may be from now, both ways, a `DURATION`",
		set:   durationOf(func(o *Options) *time.Duration { return &o.Tolerance })},
	{Name: "preset", Option: "preset",
		Usage: "where the event id is read, a `PROVIDER` preset (default: the --verify provider)",
		set:   text(func(o *Options) *string { return &o.Preset })},
	{Name: "scope", Option: "scope",
		Usage: "`SCOPE` that prefixes a preset's key (letters, digits, '.', '_', '-')",
		set:   text(func(o *Options) *string { return &o.Scope })},
	{Name: "hashing", Option: "hashing mode", Default: string(HashingCodeNode), Choices: []string{string(HashingCodeNode), string(HashingCryptoNode), string(HashingKeysvc), string(HashingNode)},
		Usage: "how the workflow builds the key, a `MODE`: code-node, crypto-node, keysvc, or node (idemhook's community node, which n8n must have installed: docs/n8n-node.md); with --pattern inbox, code-node or node saves the receipt",
		set:   nonEmpty(func(o *Options) *Hashing { return &o.Hashing })},
	{Name: "node-store", Option: "node store", Default: NodeStorePostgres, Choices: []string{NodeStorePostgres, NodeStoreKeysvc},
		Usage: "with --hashing node, where the community node reserves, a `STORE`: postgres (package " + communitynode.PostgresName + ", self-hosted n8n) or keysvc (package " + communitynode.KeysvcName + ", which n8n Cloud can install)",
		set:   nonEmpty(func(o *Options) *string { return &o.NodeStore })},
	{Name: "node-type", Option: "node type", Choices: []string{communitynode.PostgresType, communitynode.PostgresCustomType, communitynode.KeysvcType, communitynode.KeysvcCustomType},
		Usage: "with --hashing node, the community node's `TYPE` as n8n loaded it: <package>.<node> (a package in ~/.n8n/nodes, the default) or CUSTOM.<node> (N8N_CUSTOM_EXTENSIONS)",
		set:   nonEmpty(func(o *Options) *string { return &o.NodeType })},
	{Name: "guard", Option: "guard mode", Default: string(DefaultGuard), Choices: []string{string(GuardLease), string(GuardTransactional), string(GuardAtMostOnce)},
		Usage: "how the key is held while the business step runs, a `MODE`: lease (a retry meanwhile gets 409, a dead attempt's key is taken over after the lease), transactional (one SQL statement reserves and writes), or at-most-once (first sight wins: an attempt that dies loses its event)",
		set:   nonEmpty(func(o *Options) *Guard { return &o.Guard })},
	{Name: "lease", Option: "lease", Default: "5m",
		Usage: "in lease mode, how long an attempt holds the key before a retry may take it over, a `DURATION` such as 90s or 5m: above your step's worst running time",
		set:   durationOf(func(o *Options) *time.Duration { return &o.Lease })},
	{Name: "events-table", Option: "events table", Default: DefaultEventsTable,
		Usage: "`TABLE` of reserved keys (table or schema.table)",
		set:   nonEmpty(func(o *Options) *string { return &o.EventsTable })},
	{Name: "business-table", Option: "business table", Default: DefaultBusinessTable,
		Usage: "`TABLE` of the example business step",
		set:   nonEmpty(func(o *Options) *string { return &o.BusinessTable })},
	{Name: "save-success", Option: "save success", Choices: []string{SaveAll, SaveNone},
		Usage: "what n8n keeps of a successful execution, which holds the webhook's body: `all|none` (default: n8n's setting; the inbox receiver: none)",
		set:   text(func(o *Options) *string { return &o.Executions.SaveSuccess })},
	{Name: "save-errors", Option: "save errors", Choices: []string{SaveAll, SaveNone},
		Usage: "what n8n keeps of a failed execution: `all|none` (default: n8n's setting)",
		set:   text(func(o *Options) *string { return &o.Executions.SaveErrors })},
	{Name: "save-manual", Option: "save manual", Choices: []string{"true", "false"},
		Usage: "whether n8n keeps runs started from the editor: `true|false` (default: n8n's setting)",
		set:   text(func(o *Options) *string { return &o.Executions.SaveManual })},
	{Name: "execution-timeout", Option: "execution timeout",
		Usage: "stop an execution after this `DURATION`, such as 5m (default: n8n's setting)",
		set:   durationOf(func(o *Options) *time.Duration { return &o.Executions.Timeout })},
	{Name: "keysvc-url", Option: "keysvc URL", Default: DefaultKeysvcURL,
		Usage: "keysvc's base `URL` as n8n reaches it (--hashing keysvc)",
		set:   nonEmpty(func(o *Options) *string { return &o.KeysvcURL })},
	{Name: "keysvc-credential", Option: "keysvc credential",
		Usage: "`NAME` of the n8n credential holding keysvc's token (Bearer Auth with --hashing keysvc, default \"" + DefaultKeysvcCredential + "\" unless keysvc is on loopback; Idemhook Keysvc API with --node-store keysvc, default \"" + DefaultNodeKeysvcCredential + "\"); none sends no token",
		set:   text(func(o *Options) *string { return &o.KeysvcCredential })},

	{Name: "receiver", Option: "receiver", Default: string(ReceiverN8N), Choices: []string{string(ReceiverN8N), string(ReceiverKeysvc)},
		Usage: "inbox: who saves the provider's deliveries, a `RECEIVER`: n8n (receiver-workflow.json) or keysvc (its durable inbox forwards to target-workflow.json); keysvc by default for standardwebhooks, which n8n cannot verify",
		set:   nonEmpty(func(o *Options) *Receiver { return &o.Receiver })},
	{Name: "account", Option: "account", Default: DefaultAccount,
		Usage: "inbox: the receipt's `ACCOUNT` when the event names none (Stripe Connect events carry \"account\")",
		set:   nonEmpty(func(o *Options) *string { return &o.Account })},
	{Name: "rules", Option: "rules", Default: rules.DefaultPreset,
		Usage: "inbox: the effect `RULES` the worker's decision is compiled from: a preset (" + strings.Join(rules.PresetNames(), ", ") + ") or a rules file, YAML or JSON (docs/inbox.md)",
		set: func(o *Options, v string) error {
			rs, err := rules.Load(v)
			o.Rules = rs
			return err
		}},
	{Name: "events", Option: "events",
		Usage: "inbox: the allowlist of event `TYPES` the worker acts on, comma-separated (default: every type the rules handle; else a subset of them)",
		set: func(o *Options, v string) error {
			if strings.TrimSpace(v) == "" {
				return errZero
			}
			o.Events = strings.Split(v, ",")
			return nil
		}},
	{Name: "defer-limit", Option: "defer limit", Default: "24h",
		Usage: "inbox: how long an event whose transition is not allowed yet is retried before it is failed, a `DURATION`",
		set:   durationOf(func(o *Options) *time.Duration { return &o.DeferLimit })},
	{Name: "claim-lease", Option: "claim lease", Default: "2m",
		Usage: "inbox: how long a worker holds an event before the recoverer may re-offer it, a `DURATION`",
		set:   durationOf(func(o *Options) *time.Duration { return &o.ClaimLease })},
	{Name: "max-attempts", Option: "max attempts", Default: strconv.Itoa(DefaultMaxAttempts),
		Usage: "inbox: claims of an event whose worker never finishes before it is failed, a `NUMBER`",
		set:   integer(func(o *Options) *int { return &o.MaxAttempts })},
	{Name: "retry-backoff", Option: "retry backoff", Default: "30s",
		Usage: "inbox: first delay before a deferred event, or one whose decision failed, is offered again, doubled per attempt up to 15m, a `DURATION`",
		set:   durationOf(func(o *Options) *time.Duration { return &o.RetryBackoff })},
	{Name: "db-schema", Option: "database schema",
		Usage: "inbox: PostgreSQL `SCHEMA` of the tables and functions (default: the search_path, public)",
		set:   text(func(o *Options) *string { return &o.DBSchema })},
	{Name: "sweep-every", Option: "sweep interval", Default: "1m",
		Usage: "inbox: schedule of the recoverer and the outbox dispatcher, a `DURATION`: 1m-59m, 1h-23h or 24h",
		set:   durationOf(func(o *Options) *time.Duration { return &o.SweepEvery })},
	{Name: "outbox-url", Option: "outbox URL",
		Usage: "inbox: the external API's `URL`: POST URL with Idempotency-Key, GET URL/{operation_key} to reconcile (none: no outbox workflow; the tasks wait in outbox_tasks)",
		set:   text(func(o *Options) *string { return &o.OutboxURL })},
	{Name: "outbox-credential", Option: "outbox credential",
		Usage: "inbox: `NAME` of an n8n Bearer Auth credential for the outbox API",
		set:   text(func(o *Options) *string { return &o.OutboxCredential })},
	{Name: "outbox-max-attempts", Option: "outbox max attempts", Default: strconv.Itoa(DefaultOutboxMaxAttempts),
		Usage: "inbox: sends of a task before it is failed, a `NUMBER`",
		set:   integer(func(o *Options) *int { return &o.OutboxMaxAttempts })},
	{Name: "outbox-backoff", Option: "outbox backoff", Default: "10s",
		Usage: "inbox: first retry delay of a task, doubled per attempt with jitter, a `DURATION`",
		set:   durationOf(func(o *Options) *time.Duration { return &o.OutboxBackoff })},
	{Name: "outbox-timeout", Option: "outbox timeout", Default: "10s",
		Usage: "inbox: how long a call may take before its result is ambiguous, a `DURATION`",
		set:   durationOf(func(o *Options) *time.Duration { return &o.OutboxTimeout })},
	{Name: "outbox-batch", Option: "outbox batch", Default: strconv.Itoa(DefaultOutboxBatch),
		Usage: "inbox: tasks one dispatcher run claims, a `NUMBER`",
		set:   integer(func(o *Options) *int { return &o.OutboxBatch })},
}

// The pattern each flag applies to is read from the field it sets, once,
// so that the struct is the one place that says it.
func init() {
	for i := range Flags {
		Flags[i].Pattern, Flags[i].field = Flags[i].probe()
	}
}

// probe sets a sample value on zero options and reports which pattern's
// group, and which field of it, changed.
func (f Flag) probe() (Pattern, string) {
	for _, v := range append([]string{f.Default, "x", "1", "1m"}, f.Choices...) {
		var o Options
		if f.set(&o, v) != nil || reflect.ValueOf(o).IsZero() {
			continue
		}
		for pattern, group := range map[Pattern]any{PatternReserve: o.ReserveOptions, PatternInbox: o.InboxOptions} {
			if field, ok := firstSetField(reflect.ValueOf(group)); ok {
				return pattern, field.Name
			}
		}
		return "", ""
	}
	panic("generator: no sample value sets the option of --" + f.Name)
}

// NotApplicableError is a flag given with a pattern it does not apply to.
type NotApplicableError struct {
	Flag             string
	Pattern, Applies Pattern
}

func (e *NotApplicableError) Error() string {
	return fmt.Sprintf("--%s applies to --pattern %s only (this is --pattern %s)", e.Flag, e.Applies, e.Pattern)
}

// CheckApplies returns a *NotApplicableError for the first flag of set
// (the names the command line gave) that does not apply to o's pattern: an
// option of the inbox pattern with the reserve pattern, or one of the
// reserve pattern with the inbox pattern. Ignoring it instead would
// generate something else than the user asked for, without a word.
func CheckApplies(o Options, set []string) error {
	pattern := o.withDefaults().Pattern
	for _, name := range set {
		if f := FlagFor(name); f != nil && f.Pattern != "" && f.Pattern != pattern {
			return &NotApplicableError{Flag: name, Pattern: pattern, Applies: f.Pattern}
		}
	}
	return nil
}

// FlagError is a value a flag could not parse.
type FlagError struct {
	Flag   string
	Value  string
	Reason string
}

func (e *FlagError) Error() string {
	return fmt.Sprintf("invalid value %q for --%s: %s", e.Value, e.Flag, e.Reason)
}

// OptionsFromFlags reads options from flag values by flag name, as the CLI
// would from --name=value: a parse failure is a *FlagError, an unknown name
// too. The options are not validated (Files does that).
func OptionsFromFlags(values map[string]string) (Options, error) {
	var o Options
	for _, f := range Flags {
		v, ok := values[f.Name]
		if !ok {
			continue
		}
		if err := f.Set(&o, v); err != nil {
			return Options{}, &FlagError{Flag: f.Name, Value: v, Reason: err.Error()}
		}
	}
	names := make([]string, 0, len(values))
	for name := range values {
		if FlagFor(name) == nil {
			return Options{}, &FlagError{Flag: name, Reason: "no such option"}
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return o, CheckApplies(o, names)
}

// FlagFor returns the flag called name, or nil.
func FlagFor(name string) *Flag {
	for i := range Flags {
		if Flags[i].Name == name {
			return &Flags[i]
		}
	}
	return nil
}

// FlagOf returns the flag of the option an *OptionError names, or nil.
func FlagOf(option string) *Flag {
	for i := range Flags {
		if Flags[i].Option == option {
			return &Flags[i]
		}
	}
	return nil
}
