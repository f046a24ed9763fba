package generator

import (
	"crypto/sha256"
	"fmt"
)

// Ids are derived from names, never random, so the output is reproducible
// and n8n updates a re-imported workflow in place instead of adding a copy.

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// workflowID returns a 16-character id in n8n's alphabet, derived from seed.
func workflowID(seed string) string {
	sum := sha256.Sum256([]byte("idemhook/workflow-id/" + seed))
	out := make([]byte, 16)
	for i := range out {
		out[i] = idAlphabet[int(sum[i])%len(idAlphabet)]
	}
	return string(out)
}

// UUIDFrom returns a name-based UUID (version 5 layout, SHA-256 truncated):
// the same seed gives the same id, so re-importing updates in place.
func UUIDFrom(seed string) string {
	sum := sha256.Sum256([]byte("idemhook/uuid/" + seed))
	b := sum[:16]
	b[6] = (b[6] & 0x0f) | 0x50
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
