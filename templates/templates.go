// Package templates holds what users copy: the n8n Code node script that
// builds the idempotency key, and (in workflows/) the generator's output for
// each mode, kept in sync by the generator's golden test.
package templates

import _ "embed"

// CodeNodeScript is the JavaScript of the "Build Idempotency Key" Code node,
// embedded as is into every generated workflow that uses a Code node.
//
//go:embed code-node/idempotency-key.js
var CodeNodeScript string
