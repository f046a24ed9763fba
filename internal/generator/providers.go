package generator

import (
	"github.com/idemhook/idemhook/internal/rules"
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

// ProviderChoices lists the providers in the order the page offers them
// (package provider's).
func ProviderChoices() []ProviderChoice {
	out := []ProviderChoice{{Name: "", Label: "Any sender (the body's id; no signature check)"}}
	presets := rules.PresetNames()
	for _, p := range provider.All {
		c := ProviderChoice{Name: p.Name, Label: p.Label, Verify: p.Name, Preset: p.Name, Receiver: ReceiverN8N}
		for _, r := range presets {
			if rules.PresetProvider(r) == p.Name && c.Rules == "" {
				c.Rules = r
			}
		}
		if p.WorkflowCannot != "" {
			c.Receiver = ReceiverKeysvc // see the inbox pattern's receivers in docs/inbox.md
		}
		out = append(out, c)
	}
	return out
}
