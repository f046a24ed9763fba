// Package provider is the table of the webhook providers idemhook knows:
// their names and the headers their signature schemes read. Package
// signature verifies them; the generator and the planner page's
// WebAssembly module need the table alone, without the cryptography.
package provider

import (
	"fmt"
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

// Names lists every provider, in the order idemhook shows them.
var Names = []string{Stripe, StandardWebhooks, GitHub, Shopify, Slack}

// Title is name as a user reads it ("Standard Webhooks"), or name itself
// for an unknown one.
func Title(name string) string {
	switch name {
	case Stripe:
		return "Stripe"
	case StandardWebhooks:
		return "Standard Webhooks"
	case GitHub:
		return "GitHub"
	case Shopify:
		return "Shopify"
	case Slack:
		return "Slack"
	}
	return name
}

// Parse returns name when it is a provider's, and an error naming them
// otherwise.
func Parse(name string) (string, error) {
	for _, n := range Names {
		if n == name {
			return n, nil
		}
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
	switch name {
	case Stripe:
		return []string{"Stripe-Signature"}
	case StandardWebhooks:
		return []string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature", "Svix-Id", "Svix-Timestamp", "Svix-Signature"}
	case GitHub:
		return []string{"X-Hub-Signature-256"}
	case Shopify:
		return []string{"X-Shopify-Hmac-Sha256"}
	case Slack:
		return []string{"X-Slack-Request-Timestamp", "X-Slack-Signature"}
	}
	return nil
}
