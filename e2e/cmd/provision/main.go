// Command provision installs what the e2e tests' local runtime needs (Node
// 24, n8n, Node-RED, PostgreSQL 16 from the npm registry) into the cache folder, and
// builds and packs the community node package (n8n-nodes-idemhook), with
// progress on stderr. The tests provision by themselves; CI calls this first
// so the long first install is visible and timed on its own.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/idemhook/idemhook/internal/sandbox"
)

func main() {
	printNodeBin := flag.Bool("print-node-bin", false, "print only the folder of the Node "+sandbox.NodeMajor+" binary on stdout (for PATH)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	in, err := sandbox.Provision(ctx, sandbox.Needs{Postgres: sandbox.PostgresMajor, N8N: true, NodeRED: true, CommunityNode: true, Why: "the e2e tests run them"}, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "provision:", err)
		os.Exit(1)
	}
	if *printNodeBin {
		fmt.Println(in.NodeBin)
	}
	fmt.Fprintf(os.Stderr, "provision: ready in %s\n  node:     %s\n  postgres: %s\n  n8n:      %s\n  node-red: %s\n  packages: %s\n",
		time.Since(start).Round(time.Second), in.NodeBin, in.PostgresBin, in.N8N, in.NodeRED, strings.Join(in.CommunityNodes, " "))
}
