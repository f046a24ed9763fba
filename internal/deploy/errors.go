package deploy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/idemhook/idemhook/internal/communitynode"
)

// MissingCredentialError: the workflows use a credential that n8n does not
// have (none of that name and type).
type MissingCredentialError struct{ Type, Name string }

func (e *MissingCredentialError) Error() string {
	return fmt.Sprintf("n8n has no %s credential named %q: create it in n8n (Credentials → Add credential, type %s, name %q), or name one n8n has with the generate option for it (--credential, --verify-credential, --keysvc-credential, --outbox-credential)",
		e.Type, e.Name, e.Type, e.Name)
}

// AmbiguousCredentialError: several credentials share the name and type,
// and no --credential-id picked one. n8n's own import leaves such a node
// unbound and every delivery is then refused; deploy refuses instead.
type AmbiguousCredentialError struct {
	Type, Name string
	IDs        []string
}

func (e *AmbiguousCredentialError) Error() string {
	return fmt.Sprintf("n8n has %d %s credentials named %q (ids %s): pick one with --credential-id ID, or rename the others",
		len(e.IDs), e.Type, e.Name, strings.Join(e.IDs, ", "))
}

// AmbiguousWorkflowError: several workflows in n8n have the name of one
// being deployed, so deploy cannot tell which to update.
type AmbiguousWorkflowError struct {
	Name string
	IDs  []string
}

func (e *AmbiguousWorkflowError) Error() string {
	return fmt.Sprintf("n8n has %d workflows named %q (ids %s): archive or rename all but one, or generate with another --name",
		len(e.IDs), e.Name, strings.Join(e.IDs, ", "))
}

// PathTakenError: another published workflow serves the webhook path.
type PathTakenError struct {
	Path                     string
	WorkflowID, WorkflowName string // the workflow that holds it, when found
}

func (e *PathTakenError) Error() string {
	by := "another workflow"
	if e.WorkflowID != "" {
		by = fmt.Sprintf("workflow %q (id %s)", e.WorkflowName, e.WorkflowID)
	}
	return fmt.Sprintf("webhook path %q is already served by %s: unpublish it, or generate with another --path", e.Path, by)
}

// NodeTypeMissingError: n8n refused to publish a workflow with an
// Idempotency Guard under Type: it has no such node, because the package is
// not installed, or is loaded under the other name.
type NodeTypeMissingError struct{ Type string }

func (e *NodeTypeMissingError) Error() string {
	p, _ := communitynode.OfType(e.Type)
	other, how := p.CustomType(), "a package in ~/.n8n/nodes"
	if e.Type == p.CustomType() {
		other, how = p.Type(), "a folder in N8N_CUSTOM_EXTENSIONS"
	}
	return fmt.Sprintf("n8n has no node %s (the Idempotency Guard on %s, loaded as %s): install the community node package %s and restart n8n (docs/n8n-node.md#install), or, if n8n loads it as %s, generate with --node-type %s",
		e.Type, p.Store, how, p.Name, other, other)
}

// ErrNotLive: a workflow was published but its production URL does not
// answer as a registered webhook.
var ErrNotLive = errors.New("published, but its production URL does not answer as a registered webhook")
