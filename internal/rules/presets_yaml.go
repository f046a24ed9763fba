//go:build !js

package rules

import (
	"embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

//go:generate go run ./internal/genpresets

// The presets are rules files like any other, embedded: `idemhook rules
// init --preset NAME` writes one out for a user to start from.
//
//go:embed presets/*.yaml
var presetFiles embed.FS

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

// PresetTable renders every preset, parsed, as presets.json holds them
// (see decodePresetTable).
func PresetTable() ([]byte, error) {
	table := map[string]*Rules{}
	for _, name := range PresetNames() {
		rs, err := Preset(name)
		if err != nil {
			return nil, err
		}
		table[name] = rs
	}
	b, err := json.MarshalIndent(table, "", " ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
