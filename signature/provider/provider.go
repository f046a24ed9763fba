// Package provider is the table of the webhook providers idemhook knows,
// the one place a provider is added: its name, the headers its signature
// scheme reads, where its deliveries carry the id that stays the same across
// retries (the key preset), and where they name their event type and
// account (the inbox rules). Package signature verifies the schemes,
// eventkey derives the keys and rules reads the receipts from this table;
// the generator and the planner page's WebAssembly module need the table
// alone, without the cryptography, so it imports nothing of idemhook.
//
// What cannot import it is checked against it by tests: the Code node
// scripts (templates/code-node), the planner page (planner/web/planner.js)
// and the n8n community node's generated providers.
package provider

import (
	"fmt"
	"slices"
	"strings"
)

// The providers' names.
const (
	Stripe           = "stripe"
	StandardWebhooks = "standardwebhooks"
	GitHub           = "github"
	Shopify          = "shopify"
	Slack            = "slack"
)

// Provider is what idemhook knows of one provider. Header names are written
// as the code that reads them always has; readers match them without regard
// to case.
type Provider struct {
	// Name is the provider's value for --verify, --preset and a rules
	// file's provider.
	Name string
	// Title is the name as a user reads it ("Standard Webhooks"), and Label
	// what a chooser offers ("Standard Webhooks (Svix and others)").
	Title, Label string
	// SignatureHeaders are the request headers the signature scheme reads,
	// in canonical form.
	SignatureHeaders []string
	// WorkflowHMAC is how n8n's Crypto node encodes the HMAC a workflow
	// compares with the request's ("hex" or "base64"), when a workflow can
	// check the signature; otherwise WorkflowCannot says why not, and
	// keysvc checks it.
	WorkflowHMAC, WorkflowCannot string
	// Key is where a delivery carries its id; the zero Key is the key
	// spec's default (the body's "id"), which takes no scope.
	Key Key
	// Type and Account are where a delivery names its event type and the
	// account it is about, for the inbox rules; a provider with no Type
	// has no rules yet, and one with no Account takes the receiver's.
	Type, Account Source
}

// Key is a key preset: "<Prefix>:<scope>:<id>", the id read from the first
// of IDHeaders present, or from the body's top-level IDMember; the scope
// given, else ScopeHeader's value.
type Key struct {
	Prefix      string
	IDHeaders   []string
	IDMember    string
	ScopeHeader string
}

// Source is where a delivery keeps a value: a request header, or a path of
// object members into the JSON body.
type Source struct {
	Header string
	Body   []string
}

// All lists every provider, in the order idemhook shows them. Where each
// keeps an event's type and account:
//   - Stripe: the body's type; a Connect event's account.
//   - Standard Webhooks (Svix and the senders that follow the spec): the
//     body's type; no account, so the receiver's --account.
//   - GitHub: the event header (deployment_status; the action is in the
//     body); the App installation's id in the body.
//   - Shopify: the topic header (orders/paid); the shop's domain header.
//   - Slack: no rules yet.
var All = []Provider{
	{Name: Stripe, Title: "Stripe", Label: "Stripe",
		SignatureHeaders: []string{"Stripe-Signature"}, WorkflowHMAC: "hex",
		Type: Source{Body: []string{"type"}}, Account: Source{Body: []string{"account"}}},
	{Name: StandardWebhooks, Title: "Standard Webhooks", Label: "Standard Webhooks (Svix and others)",
		SignatureHeaders: []string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature", "Svix-Id", "Svix-Timestamp", "Svix-Signature"},
		WorkflowCannot:   "Standard Webhooks signs with a binary key (or an ed25519 one, v1a) that n8n's Crypto credential cannot hold",
		Key:              Key{Prefix: "swh", IDHeaders: []string{"Webhook-Id", "Svix-Id"}},
		Type:             Source{Body: []string{"type"}}},
	{Name: GitHub, Title: "GitHub", Label: "GitHub",
		SignatureHeaders: []string{"X-Hub-Signature-256"}, WorkflowHMAC: "hex",
		Key:  Key{Prefix: "gh", IDHeaders: []string{"X-Github-Delivery"}, ScopeHeader: "X-Github-Hook-Id"},
		Type: Source{Header: "X-GitHub-Event"}, Account: Source{Body: []string{"installation", "id"}}},
	{Name: Shopify, Title: "Shopify", Label: "Shopify",
		SignatureHeaders: []string{"X-Shopify-Hmac-Sha256"}, WorkflowHMAC: "base64",
		Key:  Key{Prefix: "shopify", IDHeaders: []string{"X-Shopify-Webhook-Id"}, ScopeHeader: "X-Shopify-Shop-Domain"},
		Type: Source{Header: "X-Shopify-Topic"}, Account: Source{Header: "X-Shopify-Shop-Domain"}},
	{Name: Slack, Title: "Slack", Label: "Slack",
		SignatureHeaders: []string{"X-Slack-Request-Timestamp", "X-Slack-Signature"}, WorkflowHMAC: "hex",
		Key: Key{Prefix: "slack", IDMember: "event_id"}},
}

// Names lists every provider's name, in the order of All.
var Names = func() []string {
	out := make([]string, len(All))
	for i, p := range All {
		out[i] = p.Name
	}
	return out
}()

// Lookup returns the provider called name (false when there is none).
func Lookup(name string) (Provider, bool) {
	for _, p := range All {
		if p.Name == name {
			return p, true
		}
	}
	return Provider{}, false
}

// Title is name as a user reads it ("Standard Webhooks"), or name itself
// for an unknown one.
func Title(name string) string {
	if p, ok := Lookup(name); ok {
		return p.Title
	}
	return name
}

// Parse returns name when it is a provider's, and an error naming them
// otherwise.
func Parse(name string) (string, error) {
	if p, ok := Lookup(name); ok {
		return p.Name, nil
	}
	return "", fmt.Errorf("unknown provider %.40q: use %s", name, List())
}

// List names the providers for a message: "stripe, standardwebhooks,
// github, shopify or slack".
func List() string {
	return strings.Join(Names[:len(Names)-1], ", ") + " or " + Names[len(Names)-1]
}

// Headers lists the request headers name's signature scheme reads, in
// canonical form (nil for an unknown name).
func Headers(name string) []string {
	p, _ := Lookup(name)
	return slices.Clone(p.SignatureHeaders)
}
