package keysvc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
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
	fill := strings.NewReplacer("{key}", "k", "{endpoint}", "e", "{id}", "1")
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
