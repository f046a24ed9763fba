package sandbox

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// docker-compose.yml mirrors the pins of versions.go; this fails when one
// moves without the other.
func TestComposeMirrorsPins(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"postgres": PostgresMajor, "redis": RedisMajor, "n8nio/n8n": N8NVersion, "haproxy": HAProxyVersion}
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*image:\s*(\S+):(\S+)\s*$`).FindAllStringSubmatch(string(raw), -1) {
		pin, pinned := want[m[1]]
		if !pinned {
			t.Errorf("docker-compose.yml runs %s:%s, which versions.go does not pin", m[1], m[2])
			continue
		}
		seen[m[1]] = true
		if m[2] != pin {
			t.Errorf("docker-compose.yml runs %s:%s, versions.go pins %s", m[1], m[2], pin)
		}
	}
	for image := range want {
		if !seen[image] {
			t.Errorf("docker-compose.yml does not run %s", image)
		}
	}
	for name, value := range N8NSettings {
		if !regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(name) + `:\s*"?` + regexp.QuoteMeta(value) + `"?\s*$`).Match(raw) {
			t.Errorf("docker-compose.yml does not set %s=%s for n8n (versions.go's N8NSettings)", name, value)
		}
	}
	if _, ok := PostgresNPMVersions[PostgresMajor]; !ok {
		t.Errorf("PostgresNPMVersions has no package for PostgresMajor %s", PostgresMajor)
	}
	for major, version := range PostgresNPMVersions {
		if ok, _ := regexp.MatchString(`^`+regexp.QuoteMeta(major)+`\.`, version); !ok {
			t.Errorf("PostgresNPMVersions[%s] = %s, which is not PostgreSQL %s", major, version, major)
		}
	}
}

// The local runtime's n8n environment carries every shared setting, lets a
// caller add variables but not override the stack's, and keeps the
// caller's own N8N_* variables out.
func TestLocalN8NEnvironment(t *testing.T) {
	t.Setenv("N8N_LOG_LEVEL", "debug")
	rt := &localRuntime{base: t.TempDir(), extraEnv: map[string]string{"CRM_URL": "http://crm.test", "DB_POSTGRESDB_PORT": "1"}}
	env := map[string]string{}
	for _, kv := range rt.n8nEnvironment(pgTarget{Host: "127.0.0.1", Port: 5432, Database: "n8n"}, 5678, 5679) {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := env[k]; dup {
			t.Errorf("%s set twice", k)
		}
		env[k] = v
	}
	for _, shared := range []map[string]string{N8NSettings, n8nStackSettings} {
		for k, v := range shared {
			if env[k] != v {
				t.Errorf("%s=%q, want %q", k, env[k], v)
			}
		}
	}
	if env["CRM_URL"] != "http://crm.test" || env["DB_POSTGRESDB_PORT"] != "5432" {
		t.Errorf("caller's variables: CRM_URL=%q DB_POSTGRESDB_PORT=%q", env["CRM_URL"], env["DB_POSTGRESDB_PORT"])
	}
}
