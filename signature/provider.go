package signature

import (
	"encoding/base64"
	"encoding/hex"
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

// scheme is one provider's row: how a delivery is verified from its
// headers, what its secrets must look like beyond being set (nil: any
// non-empty secret, an HMAC key used as given), and how its sender signs a
// body at a timestamp (ts, in Unix seconds).
type scheme struct {
	verifier     func(h Header, secrets []string, opts Options) *Verifier
	checkSecrets func(secrets []string) error
	sign         func(u Unsigned, ts string) (map[string]string, error)
}

// schemes is every provider's row: adding a provider is a row here and one
// in package provider's table.
var schemes = map[Provider]scheme{
	ProviderStripe: {
		verifier: func(h Header, secrets []string, opts Options) *Verifier {
			return stripeVerifier(h.Get("Stripe-Signature"), secrets, opts)
		},
		sign: func(u Unsigned, ts string) (map[string]string, error) {
			return map[string]string{"Stripe-Signature": "t=" + ts + ",v1=" + hex.EncodeToString(mac([]byte(u.Secret), []byte(ts+"."), u.Body))}, nil
		},
	},
	ProviderStandardWebhooks: {
		// Svix's svix-* header names are accepted too.
		verifier: func(h Header, secrets []string, opts Options) *Verifier {
			if h.Get("Webhook-Id") == "" && h.Get("Svix-Id") != "" {
				return standardWebhooksVerifier(h.Get("Svix-Id"), h.Get("Svix-Timestamp"), h.Get("Svix-Signature"), secrets, opts)
			}
			return standardWebhooksVerifier(h.Get("Webhook-Id"), h.Get("Webhook-Timestamp"), h.Get("Webhook-Signature"), secrets, opts)
		},
		checkSecrets: func(secrets []string) error {
			_, err := standardWebhooksKeys(secrets)
			return err
		},
		sign: signStandardWebhooks,
	},
	ProviderGitHub: {
		verifier: func(h Header, secrets []string, _ Options) *Verifier {
			return githubVerifier(h.Get("X-Hub-Signature-256"), secrets)
		},
		sign: func(u Unsigned, _ string) (map[string]string, error) {
			return map[string]string{"X-Hub-Signature-256": "sha256=" + hex.EncodeToString(mac([]byte(u.Secret), u.Body))}, nil
		},
	},
	ProviderShopify: {
		verifier: func(h Header, secrets []string, _ Options) *Verifier {
			return shopifyVerifier(h.Get("X-Shopify-Hmac-Sha256"), secrets)
		},
		sign: func(u Unsigned, _ string) (map[string]string, error) {
			return map[string]string{"X-Shopify-Hmac-Sha256": base64.StdEncoding.EncodeToString(mac([]byte(u.Secret), u.Body))}, nil
		},
	},
	ProviderSlack: {
		verifier: func(h Header, secrets []string, opts Options) *Verifier {
			return slackVerifier(h.Get("X-Slack-Request-Timestamp"), h.Get("X-Slack-Signature"), secrets, opts)
		},
		sign: func(u Unsigned, ts string) (map[string]string, error) {
			return map[string]string{"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": "v0=" + hex.EncodeToString(mac([]byte(u.Secret), []byte("v0:"+ts+":"), u.Body))}, nil
		},
	},
}

// schemeOf is p's row, or an error naming p when it has none.
func schemeOf(p Provider) (scheme, error) {
	s, ok := schemes[p]
	if !ok {
		return scheme{}, fmt.Errorf("unknown provider %q", string(p))
	}
	return s, nil
}

// CheckSecrets reports whether secrets have the form p's scheme needs, so
// that a service can refuse a bad configuration at start rather than fail
// every delivery. It fails with ErrNoSecret when no secret is set, and with
// ErrInvalidSecret, naming the secret's position in the list (never its
// value), when a Standard Webhooks secret is neither whsec_<base64> nor a
// whpk_ public key (the base64 of 32 bytes). The other schemes key an HMAC
// with the secret as given, so any non-empty secret fits them.
func (p Provider) CheckSecrets(secrets []string) error {
	s, err := schemeOf(p)
	if err != nil {
		return err
	}
	if err := checkSecrets(secrets); err != nil || s.checkSecrets == nil {
		return err
	}
	return s.checkSecrets(secrets)
}

// Header is what Verify reads of a request's headers; http.Header has it.
type Header interface {
	Get(name string) string
}

// Verify checks a request's signature with p's scheme. Standard Webhooks
// also accepts Svix's svix-* header names. NewVerifier does the same with a
// body that arrives in pieces.
func (p Provider) Verify(h Header, body []byte, secrets []string, opts Options) error {
	return verifyBody(p.NewVerifier(h, secrets, opts), body)
}
