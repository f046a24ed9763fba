package conformance

import (
	"bytes"
	"testing"
)

func TestVectorsFileIsGenerated(t *testing.T) {
	want, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(Raw(), want) {
		t.Fatalf("%s is stale: run `go generate ./conformance`", FileName)
	}
}

func TestVectorsCoverTheSpec(t *testing.T) {
	vs, err := Vectors()
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) < 60 {
		t.Errorf("%d vectors, the spec asks for at least 60", len(vs))
	}
	names := map[string]bool{}
	clauses := map[string]int{}
	sources := map[string]int{}
	for _, v := range vs {
		if names[v.Name] {
			t.Errorf("duplicate vector name %q", v.Name)
		}
		names[v.Name] = true
		clauses[v.Clause]++
		sources[v.Source+v.Error]++
		if _, err := v.Body(); err != nil {
			t.Error(err)
		}
	}
	for _, c := range []string{"empty", "evt", "top-level", "case-sensitive", "duplicates", "string-only", "length", "control",
		"surrogates", "exact", "bom", "utf8", "object", "one-value", "grammar", "numbers", "depth", "not-json"} {
		if clauses[c] == 0 {
			t.Errorf("no vector for clause %q", c)
		}
	}
	for _, s := range []string{"event_id", "body_sha256", "empty_body"} {
		if sources[s] == 0 {
			t.Errorf("no vector with outcome %q", s)
		}
	}
}
