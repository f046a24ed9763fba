package generator_test

import (
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/tidwall/gjson"
)

// The guard's note promises only the answers the Webhook's response mode
// can give: 401, 400 and 503 from Respond nodes; none of them from a
// Webhook that answers at once.
func TestGuardNoteFollowsTheResponseMode(t *testing.T) {
	o := generator.Options{Verify: "stripe"}
	for _, c := range []struct {
		mode         generator.ResponseMode
		want, refuse []string
	}{
		{generator.ResponseNode, []string{"401", "400", "503"}, nil},
		{generator.OnReceived, []string{"answers at once", "replay it from n8n"}, []string{"401", "400", "503 ", "409", "answers 200"}},
		{generator.LastNode, []string{"n8n answers 500"}, []string{"401", "400", "409"}},
	} {
		f, err := generator.GuardFragment(o, c.mode, "note-test")
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		for _, n := range gjson.GetBytes(f.Workflow, `nodes.#(type=="n8n-nodes-base.stickyNote")#`).Array() {
			text.WriteString(n.Get("parameters.content").String() + "\n")
		}
		for _, w := range c.want {
			if !strings.Contains(text.String(), w) {
				t.Errorf("%s: the note does not say %q:\n%s", c.mode, w, text.String())
			}
		}
		for _, w := range c.refuse {
			if strings.Contains(text.String(), w) {
				t.Errorf("%s: the note says %q, which this response mode cannot answer:\n%s", c.mode, w, text.String())
			}
		}
	}
}
