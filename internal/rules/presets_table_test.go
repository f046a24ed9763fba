//go:build !js

package rules

import (
	"bytes"
	"os"
	"reflect"
	"testing"
)

// presets.json is what the presets parse to (run `go generate ./internal/rules`
// when this fails), and decoding it, as the WebAssembly build does, gives
// every preset exactly as Preset parses it, a rule's entity the Rules' own.
func TestPresetTable(t *testing.T) {
	committed, err := os.ReadFile("presets.json")
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := PresetTable()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, fresh) {
		t.Fatal("presets.json is not what the presets parse to: run go generate ./internal/rules")
	}
	table, err := decodePresetTable(committed)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range PresetNames() {
		want, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		got := table[name]
		if !reflect.DeepEqual(want, got) {
			t.Errorf("preset %s from the table differs from the parsed one", name)
		}
		for _, r := range got.Rules {
			if r.Entity != nil && !contains(got.Entities, r.Entity) {
				t.Errorf("preset %s: rule %s's entity is a copy, not one of the Rules' entities", name, r.Name)
			}
		}
	}
}

func contains(es []*Entity, e *Entity) bool {
	for _, x := range es {
		if x == e {
			return true
		}
	}
	return false
}
