package generator

import "github.com/idemhook/idemhook/internal/rules"

// Template is a set of options whose output is committed under
// templates/workflows/<Name>, for users who copy files instead of running
// the generator.
type Template struct {
	Name    string
	Options Options
}

// Templates lists the committed templates: the defaults and each mode. It
// is a function so that the rules presets it parses are parsed only for the
// templates' tests and generator, not at every start of the CLI.
func Templates() []Template {
	return []Template{
		{Name: "default", Options: Options{}},
		{Name: "crypto-node", Options: Options{Hashing: HashingCryptoNode}},
		{Name: "at-most-once", Options: Options{ReserveOptions: ReserveOptions{Guard: GuardAtMostOnce}}},
		{Name: "transactional", Options: Options{ReserveOptions: ReserveOptions{Guard: GuardTransactional}}},
		{Name: "keysvc", Options: Options{Hashing: HashingKeysvc}},
		{Name: "node", Options: Options{Hashing: HashingNode}},
		{Name: "node-at-most-once", Options: Options{Hashing: HashingNode, ReserveOptions: ReserveOptions{Guard: GuardAtMostOnce}}},
		{Name: "node-keysvc", Options: Options{Hashing: HashingNode, NodeStore: NodeStoreKeysvc, Verify: "stripe"}},
		{Name: "verify-stripe", Options: Options{Verify: "stripe"}},
		{Name: "inbox", Options: Options{Pattern: PatternInbox}},
		{Name: "inbox-keysvc", Options: Options{Pattern: PatternInbox, InboxOptions: InboxOptions{Receiver: ReceiverKeysvc}}},
		{Name: "inbox-stripe-subscriptions", Options: Options{Pattern: PatternInbox, InboxOptions: InboxOptions{Rules: preset("stripe-subscriptions")}}},
		{Name: "inbox-shopify-orders", Options: Options{Pattern: PatternInbox, InboxOptions: InboxOptions{Rules: preset("shopify-orders")}}},
		{Name: "inbox-github-deployments", Options: Options{Pattern: PatternInbox, InboxOptions: InboxOptions{Rules: preset("github-deployments")}}},
		{Name: "inbox-standardwebhooks-generic", Options: Options{Pattern: PatternInbox, InboxOptions: InboxOptions{Rules: preset("standardwebhooks-generic")}}},
	}
}

// preset is a rules preset for a template. The presets are embedded and
// their tests parse them, so a failure here is a bug: it panics at start.
func preset(name string) *rules.Rules {
	rs, err := rules.Preset(name)
	if err != nil {
		panic(err)
	}
	return rs
}

// TemplatesDir is where the templates live, relative to the module root.
const TemplatesDir = "templates/workflows"

//go:generate go run ./internal/gentemplates
