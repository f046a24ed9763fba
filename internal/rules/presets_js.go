//go:build js

package rules

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"
)

//go:embed presets.json
var presetTable []byte

// PresetFile is not in the browser: the page has the presets parsed.
func PresetFile(name string) ([]byte, error) {
	return nil, fmt.Errorf("preset %s: the rules files are the CLI's (idemhook rules init --preset %s)", name, name)
}

// Preset returns the preset called name, from the table of presets.json.
func Preset(name string) (*Rules, error) {
	if !slices.ContainsFunc(presets, func(p preset) bool { return p.Name == name }) {
		return nil, fmt.Errorf("no rules preset %q (the presets are %s)", name, strings.Join(PresetNames(), ", "))
	}
	table, err := decodePresetTable(presetTable) // decoded each time: callers may change what they get
	if err != nil {
		return nil, err
	}
	return table[name], nil
}
