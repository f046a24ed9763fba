package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// preset is a built-in rules file (presets/NAME.yaml, read by
// presets_yaml.go; the WebAssembly build has them as a table,
// presets_js.go) and the example domain its schema creates.
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

// decodePresetTable reads presets.json, the presets as Preset parses them
// (written by `go generate ./internal/rules`): the planner page's WebAssembly module
// has them so, without a YAML parser. A rule's entity is the Rules' own
// again, as Parse makes it.
func decodePresetTable(data []byte) (map[string]*Rules, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // a condition's numbers stay json.Number, as Parse keeps them
	var table map[string]*Rules
	if err := dec.Decode(&table); err != nil {
		return nil, fmt.Errorf("presets.json: %w", err)
	}
	for _, rs := range table {
		for _, r := range rs.Rules {
			if r.Entity == nil {
				continue
			}
			for _, e := range rs.Entities {
				if e.Name == r.Entity.Name {
					r.Entity = e
				}
			}
		}
	}
	return table, nil
}
