package signature

import (
	"fmt"

	"github.com/idemhook/idemhook/signature/provider"
)

// Provider names a signing scheme and the headers it reads (the table is
// package provider's).
type Provider string

const (
	ProviderStripe           Provider = provider.Stripe
	ProviderStandardWebhooks Provider = provider.StandardWebhooks
	ProviderGitHub           Provider = provider.GitHub
	ProviderShopify          Provider = provider.Shopify
	ProviderSlack            Provider = provider.Slack
)

// Providers lists every supported provider.
var Providers = func() []Provider {
	out := make([]Provider, len(provider.Names))
	for i, n := range provider.Names {
		out[i] = Provider(n)
	}
	return out
}()

// ParseProvider returns the provider named s.
func ParseProvider(s string) (Provider, error) {
	name, err := provider.Parse(s)
	return Provider(name), err
}

// Names lists the providers for a message: "stripe, standardwebhooks,
// github, shopify or slack".
func Names() string { return provider.List() }

// Headers lists the request headers p's scheme reads, in canonical form.
func (p Provider) Headers() []string { return provider.Headers(string(p)) }

// CheckSecrets reports whether secrets have the form p's scheme needs, so
// that a service can refuse a bad configuration at start rather than fail
// every delivery. It fails with ErrNoSecret when no secret is set, and with
// ErrInvalidSecret, naming the secret's position in the list (never its
// value), when a Standard Webhooks secret is neither whsec_<base64> nor a
// whpk_ public key (the base64 of 32 bytes). The other schemes key an HMAC
// with the secret as given, so any non-empty secret fits them.
func (p Provider) CheckSecrets(secrets []string) error {
	if err := checkSecrets(secrets); err != nil {
		return err
	}
	switch p {
	case ProviderStandardWebhooks:
		_, err := standardWebhooksKeys(secrets)
		return err
	case ProviderStripe, ProviderGitHub, ProviderShopify, ProviderSlack:
		return nil
	}
	return fmt.Errorf("unknown provider %q", string(p))
}

// Header is what Verify reads of a request's headers; http.Header has it.
type Header interface {
	Get(name string) string
}

// Verify checks a request's signature with p's scheme. Standard Webhooks
// also accepts Svix's svix-* header names.
func (p Provider) Verify(h Header, body []byte, secrets []string, opts Options) error {
	switch p {
	case ProviderStripe:
		return Stripe(body, h.Get("Stripe-Signature"), secrets, opts)
	case ProviderStandardWebhooks:
		if h.Get("Webhook-Id") == "" && h.Get("Svix-Id") != "" {
			return StandardWebhooks(body, h.Get("Svix-Id"), h.Get("Svix-Timestamp"), h.Get("Svix-Signature"), secrets, opts)
		}
		return StandardWebhooks(body, h.Get("Webhook-Id"), h.Get("Webhook-Timestamp"), h.Get("Webhook-Signature"), secrets, opts)
	case ProviderGitHub:
		return GitHub(body, h.Get("X-Hub-Signature-256"), secrets)
	case ProviderShopify:
		return Shopify(body, h.Get("X-Shopify-Hmac-Sha256"), secrets)
	case ProviderSlack:
		return Slack(body, h.Get("X-Slack-Request-Timestamp"), h.Get("X-Slack-Signature"), secrets, opts)
	}
	return fmt.Errorf("unknown provider %q", string(p))
}
