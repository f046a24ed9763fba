package rules

import (
	"embed"
	"fmt"
	"os"
	"slices"
	"strings"
)

// The presets are rules files like any other, embedded: `idemhook rules
// init --preset NAME` writes one out for a user to start from.
//
//go:embed presets/*.yaml
var presetFiles embed.FS

// preset is a built-in rules file and the example domain its schema
// creates.
type preset struct {
	Name, Domain string
}

var presets = []preset{
	{Name: "stripe-orders", Domain: "orders"},
	{Name: "stripe-subscriptions", Domain: "subscriptions"},
	{Name: "shopify-orders", Domain: "shop_orders"},
	{Name: "github-deployments", Domain: "deployments"},
	{Name: "standardwebhooks-generic", Domain: "invoices"},
}

// DefaultPreset is the rules of `idemhook generate --pattern inbox`
// without --rules.
const DefaultPreset = "stripe-orders"

// PresetNames lists the presets.
func PresetNames() []string {
	names := make([]string, len(presets))
	for i, p := range presets {
		names[i] = p.Name
	}
	return names
}

// PresetProvider is the provider preset name's rules are written for ("" for
// no such preset).
func PresetProvider(name string) string {
	rs, err := Preset(name)
	if err != nil {
		return ""
	}
	return rs.Provider.Name
}

// PresetFile returns the preset's rules file as it is embedded.
func PresetFile(name string) ([]byte, error) {
	if !slices.ContainsFunc(presets, func(p preset) bool { return p.Name == name }) {
		return nil, fmt.Errorf("no rules preset %q (the presets are %s)", name, strings.Join(PresetNames(), ", "))
	}
	return presetFiles.ReadFile("presets/" + name + ".yaml")
}

// Preset returns the preset called name, parsed. Its schema creates its
// example domain's tables.
func Preset(name string) (*Rules, error) {
	data, err := PresetFile(name)
	if err != nil {
		return nil, err
	}
	rs, err := Parse(name+".yaml", data)
	if err != nil {
		return nil, fmt.Errorf("preset %s: %w", name, err)
	}
	rs.Source = "preset " + name
	for _, p := range presets {
		if p.Name == name {
			rs.Domain = p.Domain
		}
	}
	return rs, nil
}

// Load returns the preset called nameOrFile, or else the rules file at
// that path. The file's own tables must exist where its schema runs.
func Load(nameOrFile string) (*Rules, error) {
	if slices.Contains(PresetNames(), nameOrFile) {
		return Preset(nameOrFile)
	}
	data, err := os.ReadFile(nameOrFile)
	if err != nil {
		return nil, fmt.Errorf("rules %q is neither a preset (%s) nor a readable file: %w", nameOrFile, strings.Join(PresetNames(), ", "), err)
	}
	return Parse(nameOrFile, data)
}
