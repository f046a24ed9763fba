// Package conformance holds the shared test vectors of the key spec
// (docs/key-spec.md). key-vectors.json is the one file every implementation
// of the spec is tested against: the Go package eventkey, the n8n Code node
// script under templates/, the real n8n workflow in e2e/, and keysvc.
//
// The file is generated from cases.go so that its base64 bodies and SHA-256
// keys are computed, not typed; the expected classification of each case
// (event id or hash) is written by hand there.
package conformance

//go:generate go run ./internal/genvectors

import (
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// FileName is the vectors file, relative to this package's folder.
const FileName = "key-vectors.json"

//go:embed key-vectors.json
var vectorsJSON []byte

// File is the layout of key-vectors.json.
type File struct {
	Spec    string   `json:"spec"`
	Vectors []Vector `json:"vectors"`
}

// Vector is one body and the key every implementation must derive from it.
type Vector struct {
	Name   string `json:"name"`
	Clause string `json:"clause"`
	// BodyBase64 is the body exactly as delivered, standard base64.
	BodyBase64 string `json:"body_base64"`
	// Key is the expected key; empty when Error is set.
	Key string `json:"key"`
	// Source is "event_id" or "body_sha256", or with a preset
	// "provider_id" (the preset's own id); empty when Error is set.
	Source string `json:"source"`
	// Error is "empty_body" when no key may be derived, "invalid_scope"
	// when the preset refuses the scope.
	Error string `json:"error,omitempty"`
	// Preset, Scope and Headers apply a provider preset (docs/key-spec.md,
	// "Provider presets"); empty for the default spec. Header names are
	// lower case, as n8n delivers them.
	Preset  string            `json:"preset,omitempty"`
	Scope   string            `json:"scope,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// JSON is true when the body is one RFC 8259 JSON text (after an
	// optional BOM), so a sender may label it application/json.
	JSON bool `json:"json"`
	// Form is, for a multipart/form-data body (its content-type header),
	// the form as n8n hands it to a workflow, for implementations that get
	// the form rather than the bytes (the Code node). Its key is the form's
	// (source "form") unless a preset's header id comes first.
	Form *Form `json:"form,omitempty"`
}

// Form is a multipart form as n8n 2.41 parses it: Fields maps each field
// name to its value, or to the list of its values when it was sent more
// than once; Files holds each file's bytes, standard base64.
type Form struct {
	Fields map[string]any `json:"fields"`
	Files  []string       `json:"files,omitempty"`
}

// Body decodes the vector's body.
func (v Vector) Body() ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(v.BodyBase64)
	if err != nil {
		return nil, fmt.Errorf("vector %q: body_base64: %w", v.Name, err)
	}
	return b, nil
}

// Raw returns the vectors file as committed.
func Raw() []byte { return vectorsJSON }

// Vectors returns the decoded vectors of key-vectors.json.
func Vectors() ([]Vector, error) {
	var f File
	if err := json.Unmarshal(vectorsJSON, &f); err != nil {
		return nil, fmt.Errorf("parse %s: %w", FileName, err)
	}
	return f.Vectors, nil
}

// ParsedIDAgrees reports whether reading the id from the body's JSON.parse
// result, as n8n's crypto-node workflow mode does, gives the spec's answer
// for v. It does for every JSON body except one nested deeper than the spec's
// 1000 levels: JSON.parse has no depth limit and finds the id the spec
// refuses to look for. It does not for a multipart form, which that mode
// has no key for.
func (v Vector) ParsedIDAgrees() bool {
	return v.Form == nil && (v.Clause != "depth" || !v.JSON || v.Source == "event_id")
}
