//go:build js

package rules

// The planner page's WebAssembly module reads no YAML: it has the presets
// as a table (presets_js.go), and a YAML parser would weigh more than the
// rest of the rules package.
func parseYAMLTree(name string, _ []byte) (*node, error) {
	return nil, &Error{File: name, Reason: "YAML is read by the idemhook CLI, not in the browser: give the rules as JSON"}
}
