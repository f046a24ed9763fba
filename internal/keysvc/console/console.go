// Package console is keysvc's operator console: the page served at
// /console/ and what its JSON routes parse and read beyond keysvc's own
// inbox (package inbox): the n8n inbox pattern's tables (Pattern).
//
// The page is static, loads nothing from another origin and holds no data
// of its own: it asks for a bearer token (read views, admin also acts) and
// calls keysvc's /v1/console routes with it, which keysvc authenticates and
// routes. This package parses those routes' parameters and bodies
// (ParsePage, ParseSelection: an *InputError for anything out of range)
// and knows nothing of tokens or HTTP answers.
package console

import (
	"embed"
	"path"
)

//go:embed web
var web embed.FS

// ContentSecurityPolicy is the page's policy: its own script, style and
// calls to keysvc's origin, nothing else (no inline script or style, no
// frame, no form submission, no other origin).
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// File returns one of the page's files by name ("" for index.html) with
// its content type; ok is false for any other name.
func File(name string) (content []byte, contentType string, ok bool) {
	if name == "" {
		name = "index.html"
	}
	types := map[string]string{".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	ct, known := types[path.Ext(name)]
	if !known || path.Base(name) != name {
		return nil, "", false
	}
	b, err := web.ReadFile("web/" + name)
	if err != nil {
		return nil, "", false
	}
	return b, ct, true
}
