package deploy

import (
	"strings"
	"testing"
)

// n8n's refusal names the type; one guard type begins another's name, so
// the whole word is compared, and the error names the package to install.
func TestUnrecognizedGuardType(t *testing.T) {
	for _, c := range []struct{ message, want, pkg string }{
		{"Unrecognized node type: CUSTOM.idempotencyGuardPostgres", "CUSTOM.idempotencyGuardPostgres", "n8n-nodes-idemhook-postgres"},
		{"Unrecognized node type: CUSTOM.idempotencyGuard.", "CUSTOM.idempotencyGuard", "n8n-nodes-idemhook "},
		{`Workflow could not be published: Unrecognized node type: n8n-nodes-idemhook.idempotencyGuard"`, "n8n-nodes-idemhook.idempotencyGuard", "n8n-nodes-idemhook "},
		{"Unrecognized node type: n8n-nodes-base.somethingElse", "", ""},
	} {
		got, ok := missingGuardType(c.message)
		if !ok {
			got = ""
		}
		if got != c.want {
			t.Errorf("%q: %q, want %q", c.message, got, c.want)
			continue
		}
		if got != "" && !strings.Contains((&NodeTypeMissingError{Type: got}).Error(), "package "+c.pkg) {
			t.Errorf("%s: %s does not name package %s", got, (&NodeTypeMissingError{Type: got}).Error(), c.pkg)
		}
	}
}
