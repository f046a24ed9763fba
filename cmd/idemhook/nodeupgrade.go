package main

import (
	"context"
	"fmt"
	"os"

	"github.com/idemhook/idemhook/internal/communitynode"
)

// runNodeUpgrade is `idemhook node-upgrade`: an exported workflow whose
// Idempotency Guard n8n-nodes-idemhook 0.1.0 saved, rewritten for the
// packages of today (communitynode.UpgradeWorkflow).
func runNodeUpgrade(_ context.Context, args []string, std stdio) error {
	fs := newFlagSet("node-upgrade", "idemhook node-upgrade --workflow FILE --out FILE\n\n"+
		"Rewrites an exported workflow whose Idempotency Guard nodes n8n-nodes-idemhook 0.1.0 saved: a node on\n"+
		"PostgreSQL (0.1.0's default store, or Save Inbox Receipt) becomes "+communitynode.PostgresName+"'s node,\n"+
		"with its parameters, credentials and name; one on keysvc loses 0.1.0's store parameter. Install\n"+
		communitynode.PostgresName+" in n8n, then import the file written. Nodes of 0.2.0 and later are kept as they are.")
	in := fs.String("workflow", "", "the exported workflow `FILE` (n8n's download, or export:workflow's array; required)")
	out := fs.String("out", "", "`FILE` to write the upgraded workflow to (may be --workflow's; required)")
	if err := parse(fs, args, std.out); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *in == "" || *out == "" {
		return usagef("--workflow FILE and --out FILE are required")
	}
	raw, err := os.ReadFile(*in)
	if err != nil {
		return usagef("--workflow: %v", err)
	}
	upgraded, changes, err := communitynode.UpgradeWorkflow(raw)
	if err != nil {
		return usagef("--workflow %s: %v; nothing was written", *in, err)
	}
	if err := os.WriteFile(*out, upgraded, 0o644); err != nil {
		return err
	}
	for _, c := range changes {
		fmt.Fprintf(std.out, "upgraded %s\n", c)
	}
	if len(changes) == 0 {
		fmt.Fprintf(std.out, "no node of n8n-nodes-idemhook 0.1.0 in %s: %s is the same workflow\n", *in, *out)
		return nil
	}
	fmt.Fprintf(std.out, "wrote %s: install %s in n8n (and its queue workers), then import it\n", *out, communitynode.PostgresName)
	return nil
}
