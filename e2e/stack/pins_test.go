package stack

import (
	"os"
	"regexp"
	"testing"
)

// docker-compose.yml mirrors the pins of versions.go; this fails when one
// moves without the other.
func TestComposeMirrorsPins(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	images := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*image:\s*(\S+):(\S+)\s*$`).FindAllStringSubmatch(string(raw), -1) {
		images[m[1]] = m[2]
	}
	if got := images["postgres"]; got != PostgresMajor {
		t.Errorf("docker-compose.yml runs postgres:%s, versions.go pins %s", got, PostgresMajor)
	}
	if got := images["n8nio/n8n"]; got != N8NVersion {
		t.Errorf("docker-compose.yml runs n8nio/n8n:%s, versions.go pins %s", got, N8NVersion)
	}
	if ok, _ := regexp.MatchString(`^`+regexp.QuoteMeta(PostgresMajor)+`\.`, PostgresNPMVersion); !ok {
		t.Errorf("PostgresNPMVersion %s is not PostgreSQL %s", PostgresNPMVersion, PostgresMajor)
	}
}
