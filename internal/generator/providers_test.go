package generator_test

import (
	"testing"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/rules"
	"github.com/idemhook/idemhook/signature"
)

// Every provider is a choice, and what a choice sets generates: for the
// reserve pattern with its preset and check, and for the inbox pattern with
// its rules and receiver when it has rules.
func TestProviderChoicesGenerate(t *testing.T) {
	choices := generator.ProviderChoices()
	if len(choices) != len(signature.Providers)+1 || choices[0].Name != "" {
		t.Fatalf("choices %+v", choices)
	}
	for _, c := range choices {
		if c.Label == "" {
			t.Errorf("%q has no label", c.Name)
		}
		o := generator.Options{Verify: c.Verify, Preset: c.Preset}
		if c.Verify == string(signature.ProviderStandardWebhooks) {
			o.Hashing = generator.HashingKeysvc // n8n's Crypto node cannot hold its binary key
		}
		if _, err := generator.Files(o); err != nil {
			t.Errorf("%s, reserve pattern: %v", c.Name, err)
		}
		if c.Rules == "" {
			continue
		}
		rs, err := rules.Preset(c.Rules)
		if err != nil {
			t.Fatal(err)
		}
		in := generator.Options{Pattern: generator.PatternInbox, Verify: c.Verify, Preset: c.Preset, InboxOptions: generator.InboxOptions{Receiver: c.Receiver, Rules: rs}}
		if _, err := generator.Files(in); err != nil {
			t.Errorf("%s, inbox pattern with %s: %v", c.Name, c.Rules, err)
		}
	}
	if stripe := choices[1]; stripe.Name != "stripe" || stripe.Rules != "stripe-orders" {
		t.Errorf("stripe sets %+v", stripe)
	}
}
