package generator

import (
	"slices"

	"github.com/idemhook/idemhook/rules"
	"github.com/idemhook/idemhook/signature/provider"
)

// ProviderChoice is what choosing a provider sets, for the planner page's
// one control (and for anyone who asks which options fit a provider): the
// signature check, the key preset, and for the inbox pattern the rules
// preset and who receives.
type ProviderChoice struct {
	// Name is the choice's value ("" for none: the body's id, no check);
	// Label what the page shows.
	Name, Label string
	// Verify and Preset are --verify and --preset.
	Verify, Preset string
	// Rules is the inbox pattern's --rules preset for the provider ("" when
	// none ships), and Receiver its --receiver: keysvc where n8n cannot
	// check the provider's signature itself.
	Rules    string
	Receiver Receiver
}

// ProviderChoices lists the providers in the order the page offers them.
func ProviderChoices() []ProviderChoice {
	out := []ProviderChoice{{Name: "", Label: "Any sender (the body's id; no signature check)"}}
	labels := map[string]string{
		provider.Stripe: "Stripe", provider.Shopify: "Shopify", provider.GitHub: "GitHub",
		provider.StandardWebhooks: "Standard Webhooks (Svix and others)", provider.Slack: "Slack",
	}
	presets := rules.PresetNames()
	for _, p := range provider.Names {
		c := ProviderChoice{Name: p, Label: labels[p], Verify: p, Preset: p, Receiver: ReceiverN8N}
		for _, r := range presets {
			if rules.PresetProvider(r) == p && c.Rules == "" {
				c.Rules = r
			}
		}
		if p == provider.StandardWebhooks {
			c.Receiver = ReceiverKeysvc // see the inbox pattern's receivers in docs/inbox.md
		}
		out = append(out, c)
	}
	slices.SortStableFunc(out[1:], func(a, b ProviderChoice) int {
		return slices.Index(provider.Names, a.Name) - slices.Index(provider.Names, b.Name)
	})
	return out
}
