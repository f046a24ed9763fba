// Package communitynode is idemhook's two n8n community node packages seen
// from Go (the TypeScript in the folders of their names at the module's
// root): their type names, the parts of their source generated from Go's
// single sources (the SQL of package pgsql, the providers, the key spec's
// and the signature check's JavaScript), and building, packing and
// installing them into an n8n the way n8n installs a community package.
//
// Two packages, one source: n8n-nodes-idemhook is the Idempotency Guard on
// keysvc, the package n8n can verify (no runtime dependency, only its own
// credential), which is what n8n Cloud can install; n8n-nodes-idemhook-postgres
// is the guard on the user's PostgreSQL, with the inbox pattern's receipt,
// for self-hosted n8n. The second compiles the first's guard folder (a
// symbolic link) with its own store.
package communitynode

//go:generate go run ./internal/genstatements

// Package is one of the two packages.
type Package struct {
	// Name is the npm package; n8n loads only packages named n8n-nodes-*
	// (or @scope/n8n-nodes-*).
	Name string
	// Node is the Idempotency Guard node's name inside the package.
	Node string
	// Store is the store the package's node reserves in: "keysvc" or
	// "postgres".
	Store string
}

// The packages' names and their nodes' type names, as constants for the
// tables that list them (a constant keeps a table static data).
const (
	KeysvcName         = "n8n-nodes-idemhook"
	KeysvcType         = KeysvcName + ".idempotencyGuard"
	KeysvcCustomType   = "CUSTOM.idempotencyGuard"
	PostgresName       = "n8n-nodes-idemhook-postgres"
	PostgresType       = PostgresName + ".idempotencyGuardPostgres"
	PostgresCustomType = "CUSTOM.idempotencyGuardPostgres"
)

// The two packages.
var (
	// Keysvc is the verifiable package: the guard on keysvc, through the
	// package's own credential (KeysvcCredential).
	Keysvc = Package{Name: KeysvcName, Node: "idempotencyGuard", Store: "keysvc"}
	// Postgres is the self-hosted package: the guard on PostgreSQL, through
	// n8n's Postgres credential, and the inbox receipt.
	Postgres = Package{Name: PostgresName, Node: "idempotencyGuardPostgres", Store: "postgres"}
)

// Packages are both, the verifiable one first.
var Packages = []Package{Keysvc, Postgres}

// KeysvcCredential is the verifiable package's own credential type:
// keysvc's URL and a token.
const KeysvcCredential = "idemhookKeysvcApi"

// Type names. n8n names a node after where it loaded it from: a package in
// ~/.n8n/nodes (installed from the UI, by npm, or managed by
// N8N_COMMUNITY_PACKAGES) is <package>.<node>; a folder in
// N8N_CUSTOM_EXTENSIONS or ~/.n8n/custom is CUSTOM.<node>. A workflow names
// one of them, and runs only where the node was loaded that way.

// Type is the node's type name when n8n loaded the package from ~/.n8n/nodes.
func (p Package) Type() string { return p.Name + "." + p.Node }

// CustomType is the node's type name when n8n loaded it from a folder in
// N8N_CUSTOM_EXTENSIONS.
func (p Package) CustomType() string { return "CUSTOM." + p.Node }

// SourceDir is the package's folder, relative to the module's root.
func (p Package) SourceDir() string { return p.Name }

// Types lists every type name a workflow may give one of the nodes.
func Types() []string {
	var types []string
	for _, p := range Packages {
		types = append(types, p.Type(), p.CustomType())
	}
	return types
}

// OfType returns the package whose node has the type name typ.
func OfType(typ string) (Package, bool) {
	for _, p := range Packages {
		if typ == p.Type() || typ == p.CustomType() {
			return p, true
		}
	}
	return Package{}, false
}
