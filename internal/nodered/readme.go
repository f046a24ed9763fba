package nodered

import (
	"fmt"
	"strings"
)

// readme is README.md: what to set, what the flow answers, where the
// step goes.
func readme(o Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: keysvc's guard as a Node-RED flow\n\n", o.Name)
	fmt.Fprintf(&b, "Written by `idemhook generate --target node-red`. Node-RED 5 serves the webhook at `POST /%s`;\n", o.Path)
	b.WriteString("keysvc verifies, derives and reserves each delivery's key (the same key as the n8n workflows and `idemhook key`\n")
	b.WriteString("give), and only a new event reaches your step.\n\n")
	b.WriteString("## Set up\n\n")
	b.WriteString("1. Run keysvc (`keysvc`, see docs/keysvc.md) where Node-RED can reach it, with a token (`KEYSVC_TOKEN`, which has the `admin` scope:\n")
	b.WriteString("   the flow releases a failed step's key")
	if o.Lease > 0 {
		b.WriteString(" and marks a finished one done")
	}
	b.WriteString(").\n")
	if o.Verify != "" {
		fmt.Fprintf(&b, "   Give keysvc the signing secret: `KEYSVC_SECRET_%s`. The flow passes the provider's headers on unchanged.\n", strings.ToUpper(o.Verify))
	}
	b.WriteString("2. Start Node-RED with the two settings in its environment (they are never written into `flows.json`):\n\n")
	b.WriteString("   ```sh\n   KEYSVC_URL=http://keysvc:8080 KEYSVC_TOKEN=… node-red\n   ```\n\n")
	b.WriteString("3. Import `flows.json` (Menu → Import, or start Node-RED with it as its flows file: `node-red --userDir DIR flows.json`),\n")
	fmt.Fprintf(&b, "   put your step into the **%s** node (or your nodes there, their ids added to the scope of the **%s** Catch node),\n", NodeStep, NodeStepFails)
	b.WriteString("   and deploy.\n\n")
	if o.InboxTarget {
		b.WriteString("This flow is the **target of keysvc's durable inbox** (`--receiver keysvc`): keysvc receives and verifies the provider's\n")
		fmt.Fprintf(&b, "deliveries and forwards each one here, at least once, with the same `Idempotency-Key`, which the flow reserves. Set the\n")
		fmt.Fprintf(&b, "endpoint's `target` to `http://node-red:1880/%s` and its `target_token_env`; the flow reads the same token as\n", o.Path)
		fmt.Fprintf(&b, "`%s` and answers 401 to a request without it, 400 to one without an `Idempotency-Key`.\n", EnvTargetToken)
		b.WriteString("Leave the endpoint's `batch` at 1, its default: the flow takes one event per forward (keysvc would send each event\n")
		b.WriteString("of a batch it refuses again alone, so a batch costs a refused forward and changes nothing else).\n\n")
	}
	b.WriteString("## What it answers\n\n")
	b.WriteString("| case | answer |\n| --- | --- |\n")
	b.WriteString("| a new event, your step done | `200 {\"status\":\"processed\",\"key\":…}` |\n")
	b.WriteString("| the same event again | `200 {\"status\":\"duplicate\",\"key\":…}`, your step does not run |\n")
	if o.Lease > 0 {
		fmt.Fprintf(&b, "| the same event while an attempt runs | `409` with `Retry-After`: a lease of %s held; a dead attempt's lease expires and a retry takes over |\n", o.Lease)
	}
	b.WriteString("| your step throws | the key is released, `500 {\"status\":\"failed\",\"key\":…,\"released\":true}`: the provider's retry runs it again |\n")
	b.WriteString("| keysvc refuses (an empty body, a forged signature, …) | keysvc's 4xx and its JSON, nothing reserved |\n")
	b.WriteString("| keysvc unreachable, or failing | `503` with `Retry-After`, your step does not run |\n\n")
	b.WriteString("Your step runs at least once per event, with the same `msg.key` on every attempt: an attempt that dies after the step\n")
	b.WriteString("and before the flow answers (Node-RED killed)")
	if o.Lease > 0 {
		b.WriteString(" leaves the lease to expire, and the provider's retry runs the step again. Pass `msg.key` on as the\n")
	} else {
		b.WriteString(" keeps the key reserved (the event is lost unless you release it by hand). Pass `msg.key` on as the\n")
	}
	b.WriteString("`Idempotency-Key` of the APIs your step calls.\n")
	return b.String()
}
