package rules

import _ "embed"

// Schema is effects.schema.json, the JSON Schema of rules files that the
// project publishes (`idemhook rules schema` prints it). Parse accepts
// nothing it refuses.
//
//go:embed effects.schema.json
var Schema []byte
