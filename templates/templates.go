// Package templates holds what users copy: the n8n Code node script that
// builds the idempotency key, and (in workflows/) the generator's output for
// each mode, kept in sync by the generator's golden test.
package templates

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
)

// CodeNodeScript is the JavaScript of the "Build Idempotency Key" Code node
// for the default spec, embedded as is into generated workflows.
//
//go:embed code-node/idempotency-key.js
var CodeNodeScript string

// The lines KeyScript rewrites; the script declares each exactly once.
const (
	presetLine = "const PRESET = '';"
	scopeLine  = "const SCOPE = '';"
)

// KeyScript returns CodeNodeScript with its PRESET and SCOPE constants set.
// The values are written as JSON string literals, which JavaScript reads
// back exactly. Validating them is the caller's job (eventkey.ParsePreset,
// eventkey.ValidScope); the script refuses what they refuse all the same.
func KeyScript(preset, scope string) (string, error) {
	if strings.Count(CodeNodeScript, presetLine) != 1 || strings.Count(CodeNodeScript, scopeLine) != 1 {
		return "", fmt.Errorf("templates: the Code node script must declare %q and %q once", presetLine, scopeLine)
	}
	if preset == "" && scope == "" {
		return CodeNodeScript, nil // the committed file itself
	}
	p, _ := json.Marshal(preset)
	s, _ := json.Marshal(scope)
	out := strings.Replace(CodeNodeScript, presetLine, "const PRESET = "+string(p)+";", 1)
	return strings.Replace(out, scopeLine, "const SCOPE = "+string(s)+";", 1), nil
}
