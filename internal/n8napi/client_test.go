package n8napi

import (
	"encoding/json"
	"testing"
)

func TestIDTakesNumbersAndStrings(t *testing.T) {
	for raw, want := range map[string]ID{`{"id":42}`: "42", `{"id":"aB3"}`: "aB3"} {
		var e Execution
		if err := json.Unmarshal([]byte(raw), &e); err != nil || e.ID != want {
			t.Errorf("%s: %q, %v; want %q", raw, e.ID, err, want)
		}
	}
	var e Execution
	if err := json.Unmarshal([]byte(`{"id":{"x":1}}`), &e); err == nil {
		t.Error("an object id decoded")
	}
}

func TestCloneIsDeep(t *testing.T) {
	w := Workflow{Name: "w", Nodes: []map[string]any{{"name": "A", "parameters": map[string]any{"path": "p"}}}, Connections: map[string]any{}}
	c, err := w.Clone()
	if err != nil {
		t.Fatal(err)
	}
	c.Nodes[0]["parameters"].(map[string]any)["path"] = "changed"
	if w.Nodes[0]["parameters"].(map[string]any)["path"] != "p" {
		t.Error("changing the clone changed the original")
	}
}
