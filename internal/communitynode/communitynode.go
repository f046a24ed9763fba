// Package communitynode is idemhook's n8n community node package,
// n8n-nodes-idemhook (the TypeScript in the folder of that name at the
// module's root), seen from Go: the node's type names, the parts of its
// source generated from Go's single sources (the SQL of package pgsql, the
// providers), and building, packing and installing it into an n8n the way
// n8n installs a community package.
package communitynode

//go:generate go run ./internal/genstatements

// Names n8n knows the package by.
const (
	// PackageName is the npm package; n8n loads only packages named
	// n8n-nodes-* (or @scope/n8n-nodes-*).
	PackageName = "n8n-nodes-idemhook"
	// NodeName is the Idempotency Guard node's name inside the package.
	NodeName = "idempotencyGuard"
	// KeysvcCredential is the package's own credential type: keysvc's URL
	// and token.
	KeysvcCredential = "idemhookKeysvcApi"
)

// Node type names. n8n names a node after where it loaded it from: a
// package in ~/.n8n/nodes (installed from the UI, by npm, or managed by
// N8N_COMMUNITY_PACKAGES) is <package>.<node>; a folder in
// N8N_CUSTOM_EXTENSIONS or ~/.n8n/custom is CUSTOM.<node>. A workflow names
// one of them, and runs only where the node was loaded that way.
const (
	Type       = PackageName + "." + NodeName
	CustomType = "CUSTOM." + NodeName
)

// Types lists the type names a workflow may give the node.
var Types = []string{Type, CustomType}

// SourceDir is the package's folder, relative to the module's root.
const SourceDir = PackageName
