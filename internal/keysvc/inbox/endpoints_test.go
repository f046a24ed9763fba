package inbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/signature"
)

// The endpoints file refuses what would fail later, and says which endpoint
// and why.
func TestLoadEndpointsRefusesBadConfig(t *testing.T) {
	secrets := map[signature.Provider][]string{signature.ProviderStripe: {inboxSecret}}
	t.Setenv("TARGET_TOKEN", "tok")
	for _, tc := range []struct{ name, json, want string }{
		{"unknown field", `{"endpoints":[{"name":"a","target":"http://x","tagret":"y"}]}`, "unknown field"},
		{"no endpoints", `{"endpoints":[]}`, "no endpoints"},
		{"bad name", `{"endpoints":[{"name":"A/b","target":"http://x"}]}`, "name must be"},
		{"duplicate name", `{"endpoints":[{"name":"a","target":"http://x"},{"name":"a","target":"http://y"}]}`, "appears twice"},
		{"unknown provider", `{"endpoints":[{"name":"a","provider":"paypal","target":"http://x"}]}`, "paypal"},
		{"target with credentials", `{"endpoints":[{"name":"a","target":"http://u:p@x"}]}`, "without credentials"},
		{"target not http", `{"endpoints":[{"name":"a","target":"ftp://x"}]}`, "http(s) URL"},
		{"event type with a comma", `{"endpoints":[{"name":"a","target":"http://x","events":["a,b"]}]}`, "event type"},
		{"missing token variable", `{"endpoints":[{"name":"a","target":"http://x","target_token_env":"NOPE_NOT_SET"}]}`, "NOPE_NOT_SET is not set"},
		{"token in two places", `{"endpoints":[{"name":"a","target":"http://x","target_token_env":"TARGET_TOKEN","target_token_file":"/x"}]}`, "not both"},
		{"provider without a secret", `{"endpoints":[{"name":"a","provider":"github","target":"http://x"}]}`, "KEYSVC_SECRET_GITHUB"},
		{"max attempts out of range", `{"endpoints":[{"name":"a","target":"http://x","max_attempts":-1}]}`, "max_attempts"},
		{"batch out of range", `{"endpoints":[{"name":"a","target":"http://x","batch":101}]}`, "batch must be between 1 and 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadEndpoints(t, tc.json, secrets)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	eps, err := loadEndpoints(t, `{"endpoints":[{"name":"stripe","provider":"stripe","target":"https://n8n/webhook/x","target_token_env":"TARGET_TOKEN"}]}`, secrets)
	if err != nil || len(eps) != 1 || eps[0].Account != "default" || eps[0].MaxAttempts != inbox.DefaultMaxDeliveries || eps[0].Batch != 1 {
		t.Errorf("a valid file: %+v, %v", eps, err)
	}
}

// loadEndpoints writes json as an endpoints file and loads it.
func loadEndpoints(t *testing.T, json string, secrets map[signature.Provider][]string) ([]inbox.Endpoint, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "endpoints.json")
	if err := os.WriteFile(file, []byte(json), 0o600); err != nil {
		t.Fatal(err)
	}
	return inbox.LoadEndpoints(file, secrets)
}
