package keysvc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemhook/idemhook/eventkey"
)

// The committed document is valid OpenAPI 3, and it documents exactly the
// routes the server registers.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI())
	if err != nil {
		t.Fatalf("load openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not valid OpenAPI 3: %v", err)
	}
	var documented, registered []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	for _, rt := range routes {
		registered = append(registered, rt.Method+" "+rt.Path)
	}
	sort.Strings(documented)
	sort.Strings(registered)
	if strings.Join(documented, "\n") != strings.Join(registered, "\n") {
		t.Errorf("openapi.json documents:\n%s\n\nthe server registers:\n%s", strings.Join(documented, "\n"), strings.Join(registered, "\n"))
	}
	// Every documented operation is routed to its own path.
	s := New(Config{Store: nil})
	fill := strings.NewReplacer("{key}", "k", "{endpoint}", "e", "{id}", "1", "{file}", "console.js")
	for _, rt := range routes {
		if p, _, ok := s.match(fill.Replace(rt.Path)); !ok || p.pattern != rt.Path {
			t.Errorf("%s %s is not routed", rt.Method, rt.Path)
		}
	}
}

func TestServedDocumentIsTheCommittedOne(t *testing.T) {
	rec := httptest.NewRecorder()
	New(Config{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	if rec.Code != 200 || rec.Body.String() != string(OpenAPI()) || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
}

// The document states the key rule that checkKey applies: every key a
// caller names (header, query, path) is 1 to eventkey.MaxKeyBytes, and every
// route that takes a {key} documents its 400 invalid_key.
func TestOpenAPIDocumentsTheKeyRule(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI())
	if err != nil {
		t.Fatalf("load openapi.json: %v", err)
	}
	keys := map[string]*openapi3.Parameter{"path {key}": doc.Components.Parameters["Key"].Value}
	for _, p := range doc.Paths.Value("/v1/reservations").Post.Parameters {
		if p.Value.Name == KeyHeader || p.Value.Name == "key" {
			keys[p.Value.In+" "+p.Value.Name] = p.Value
		}
	}
	if len(keys) != 3 {
		t.Fatalf("found %d of the 3 key parameters: %v", len(keys), keys)
	}
	for where, p := range keys {
		s := p.Schema.Value
		var maxLength uint64 // 0: none
		if s.MaxLength != nil {
			maxLength = *s.MaxLength
		}
		if s.MinLength != 1 || maxLength != uint64(eventkey.MaxKeyBytes) {
			t.Errorf("%s: length %d-%d, want 1-%d", where, s.MinLength, maxLength, eventkey.MaxKeyBytes)
		}
	}
	for path, item := range doc.Paths.Map() {
		if !strings.Contains(path, "{key}") {
			continue
		}
		for method, op := range item.Operations() {
			if r := op.Responses.Value("400"); r == nil || r.Ref != "#/components/responses/InvalidKey" {
				t.Errorf("%s %s does not document its 400 invalid_key", method, path)
			}
		}
	}
}
