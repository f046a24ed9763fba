package generator

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemhook/idemhook/internal/duration"
)

// typeSticky is n8n's sticky note: a canvas note, not a step.
const typeSticky = "n8n-nodes-base.stickyNote"

// Docs is where the workflows' notes send people for more.
const Docs = "https://github.com/idemhook/idemhook/blob/main/docs/"

// stickyNote is a note for the canvas: markdown, placed above the node
// named anchor (the first node when anchor is empty).
type stickyNote struct {
	anchor, markdown string
}

// Sticky notes' geometry: n8n draws a node in a box of about 100 × 100 px
// from its position; a note is a box of width × height from its own.
const (
	noteWidth    = 420
	noteGap      = 40 // between a note and the nodes under it, and between notes
	noteLine     = 17 // px per line of text, about, at n8n's default size
	noteMinLines = 4
	nodeBox      = 100
)

// addNote puts a note above anchor.
func (g *graph) addNote(anchor string, lines ...string) {
	g.notes = append(g.notes, stickyNote{anchor: anchor, markdown: strings.Join(lines, "\n")})
}

// placedNotes lays the notes out in a row above every node, each at its
// anchor's x or right of the note before it, their bottoms one gap above the
// highest node, so that no note covers a node or another note.
func (g *graph) placedNotes() []node {
	if len(g.notes) == 0 || len(g.nodes) == 0 {
		return nil
	}
	top := g.nodes[0].Position[1]
	for _, n := range g.nodes {
		top = min(top, n.Position[1])
	}
	x := func(anchor string) int {
		for _, n := range g.nodes {
			if n.Name == anchor {
				return n.Position[0]
			}
		}
		return g.nodes[0].Position[0]
	}
	notes := slices.Clone(g.notes)
	slices.SortStableFunc(notes, func(a, b stickyNote) int { return x(a.anchor) - x(b.anchor) })
	var out []node
	next := x(notes[0].anchor)
	for _, n := range notes {
		lines := max(noteMinLines, wrappedLines(n.markdown))
		height := 40 + lines*noteLine
		left := max(x(n.anchor), next)
		out = append(out, node{
			Name: noteName(n.markdown), ID: UUIDFrom(g.seed + "/note/" + noteName(n.markdown)), Type: typeSticky, TypeVersion: TypeVersions[typeSticky],
			Position:   [2]int{left, top - noteGap - height},
			Parameters: map[string]any{"content": n.markdown, "width": noteWidth, "height": height},
		})
		next = left + noteWidth + noteGap
	}
	return out
}

// wrappedLines counts the lines n8n shows for markdown in a note of
// noteWidth: about 60 characters a line.
func wrappedLines(markdown string) int {
	n := 0
	for _, l := range strings.Split(markdown, "\n") {
		n += 1 + len(l)/60
	}
	return n
}

// noteName names a note after its heading: "Note: Setup".
func noteName(markdown string) string {
	title, _, _ := strings.Cut(markdown, "\n")
	title = strings.TrimSpace(strings.TrimLeft(title, "# "))
	if title == "" {
		title = "idemhook"
	}
	return "Note: " + title
}

// setupNote says what g, a workflow whose nodes are all added, needs
// before it runs: the schema, the credentials by name, n8n's environment,
// and where the docs are. What it says of n8n's environment and credentials
// is read from g's nodes, so that it says what the workflow contains.
func setupNote(g *graph, r resolved, page string) []string {
	schema := "1. Apply **schema.sql** to the database the credential points at (`idemhook schema … | psql`)."
	if r.KeysInKeysvc() {
		schema = "1. Apply **schema.sql** to the database the credential points at: the example business step's table only. keysvc keeps the keys in its own store and prunes them after its `--retention`: there is no cleanup workflow."
	}
	lines := []string{"## Setup", "", schema,
		"2. Postgres credential: **" + r.CredentialName + "** (the example business step's). `idemhook deploy` binds it by id; an editor import binds by name."}
	if !r.KeysInKeysvc() {
		lines[len(lines)-1] = "2. Postgres credential: **" + r.CredentialName + "**. `idemhook deploy` binds it by id; an editor import binds by name."
	}
	step := 3
	add := func(s string) {
		lines = append(lines, strconv.Itoa(step)+". "+s)
		step++
	}
	if r.Hashing == HashingNode {
		add("Install the community node package **" + r.nodePackageName() + "** in n8n: the Idempotency Guard builds and reserves the key. [Install](" + Docs + "n8n-node.md#install)")
	}
	if r.nodeOnKeysvc() {
		add("Idemhook Keysvc API credential: **" + r.KeysvcCredential + "**, keysvc's URL and a token with the **guard** scope (it reserves, completes and releases, and reads nothing). [keysvc](" + Docs + "keysvc.md#tokens)")
		if r.Verify != "" {
			add("keysvc verifies the " + r.Verify + " signature with the secret it holds (`KEYSVC_SECRET_" + strings.ToUpper(r.Verify) + "`): give it the provider's signing secret.")
		}
	}
	if g.requiresInCode("crypto") {
		add("Start n8n with `NODE_FUNCTION_ALLOW_BUILTIN=crypto`: a Code node `require('crypto')`s (n8n Cloud allows it).")
	}
	if g.usesCredential("crypto") {
		add("The " + r.Verify + " signing secret goes in the Crypto credential **" + r.VerifyCredential + "** (its HMAC secret).")
	}
	if r.Hashing == HashingKeysvc && r.Pattern == PatternReserve {
		add("keysvc answers at `" + r.KeysvcURL + "`" + bearerNote(r.KeysvcCredential) + ".")
	}
	add("Publish, then give the provider the production URL.")
	return append(lines, "", "[How it works]("+Docs+page+")")
}

func bearerNote(credential string) string {
	if credential == "" {
		return "; these HTTP Request nodes send **no token**, for a keysvc on loopback that runs without tokens (`--keysvc-credential NAME` names a Bearer Auth credential)"
	}
	return "; its token, with the **guard** scope, goes in the Bearer Auth credential **" + credential + "**"
}

// requiresInCode reports whether a Code node of g requires module.
func (g *graph) requiresInCode(module string) bool {
	for _, n := range g.nodes {
		if code, _ := n.Parameters["jsCode"].(string); n.Type == typeCode && strings.Contains(code, "require('"+module+"')") {
			return true
		}
	}
	return false
}

// usesCredential reports whether a node of g takes a credential of type typ.
func (g *graph) usesCredential(typ string) bool {
	for _, n := range g.nodes {
		if _, ok := n.Credentials[typ]; ok {
			return true
		}
	}
	return false
}

// guardNote explains the guard's branches over its first node.
func guardNote(r resolved) []string {
	lines := []string{"## The guard", ""}
	if r.Verify != "" && r.Hashing != HashingKeysvc {
		lines = append(lines, "The "+r.Verify+" signature is checked on the raw body first: a forged request gets 401 and reserves nothing.")
	}
	lease := retentionText(r.Lease)
	takeover := "; if its attempt dies, a retry takes the key over once the lease has expired"
	switch {
	case r.nodeOnKeysvc():
		held := ""
		if r.Guard == GuardLease {
			held = ", or leases it for " + lease + " (In Progress answers 409" + takeover + ")"
		}
		sends := "builds the key from the exact bytes and sends it to keysvc, which reserves it once"
		if r.Verify != "" {
			sends = "sends the exact bytes to keysvc, which verifies the " + r.Verify + " signature, derives the key and reserves it once"
		}
		lines = append(lines, "The **Idempotency Guard** "+sends+held+": New runs your step, Duplicate answers 200. Its error output: keysvc's refusal of the delivery (an empty body 400, a signature 401, a body over its --max-body 413), keysvc down 503, a setup to fix 500.")
	case r.Hashing == HashingKeysvc && r.Guard == GuardLease:
		lines = append(lines, "keysvc derives the key from the exact bytes and leases it for "+lease+": 201 runs your step once; 200 is a duplicate; 409 means another attempt is running"+takeover+"; keysvc unreachable answers 503, so the provider retries.")
	case r.Hashing == HashingKeysvc:
		lines = append(lines, "keysvc derives the key from the exact bytes and reserves it: 201 runs your step once; 200 is a duplicate; keysvc unreachable answers 503, so the provider retries.")
	case r.Guard == GuardTransactional:
		lines = append(lines, "The key is built from the exact bytes; **Reserve and Write** reserves it and writes in one statement: both happen or neither. A duplicate is answered 200, a failure 500 (nothing kept, the retry runs it).")
	case r.Hashing == HashingNode && r.Guard == GuardLease:
		lines = append(lines, "The **Idempotency Guard** builds the key from the exact bytes and leases it for "+lease+" in one step: New runs your step, Duplicate (finished) answers 200, In Progress 409"+takeover+". Its error output: an empty body 400, the database down 503, a setup to fix 500.")
	case r.Hashing == HashingNode:
		lines = append(lines, "The **Idempotency Guard** builds the key from the exact bytes and reserves it at first sight (at most once) in one step: New runs your step, Duplicate answers 200. Its error output: an empty body 400, the database down 503, a setup to fix 500.")
	case r.Guard == GuardLease:
		lines = append(lines, "The key is built from the exact bytes and leased for "+lease+": a new event runs your step, a finished one is a duplicate (200), one still running gets 409 with Retry-After"+takeover+". An empty body: 400. The database down: 503.")
	default:
		lines = append(lines, "The key is built from the exact bytes and reserved at first sight (INSERT … ON CONFLICT, at most once): a new event runs your step, a replay is answered 200 duplicate, also while the first attempt still runs; an attempt that dies keeps the key, and its event is lost. An empty body: 400. The database down: 503.")
	}
	return lines
}

// stepSucceededNote says what the If between the business step and Mark
// Done must test (addStepSucceeded).
const stepSucceededNote = "**Step Succeeded?** sends the guard's own item to **Release Key**: when a node with an error output fails before it runs (n8n cannot read its credential), n8n passes the node's input on as its success. Your last node must output something else (not pass its input through); a node of yours in the middle with an error output needs a check of its own."

// businessNote says where the user's own step goes, and what the guard
// promises it.
func businessNote(r resolved) []string {
	lines := []string{"## Your business step", ""}
	switch {
	case r.Guard == GuardTransactional:
		return append(lines, "Replace the example write in **Reserve and Write**'s statement (its business CTE) with your own SQL, reading the key from `reserved`.")
	case r.Guard == GuardLease && r.nodeOnKeysvc(), r.Guard == GuardLease && r.Hashing == HashingKeysvc:
		return append(lines, "Replace this node with your own. Keep its error output wired to **Release Key** (the retry runs it again) and its success to **Mark Done**, through **Step Succeeded?**. "+stepSucceededNote,
			"Your steps run at least once: an attempt that dies after them and before **Mark Done** is run again by a retry, with the same key. "+passTheKey(r))
	case r.Guard == GuardLease:
		return append(lines, "This example writes its row and marks the key done in one statement, so it runs once whatever dies when; SQL of yours on this database can go in its business CTE.",
			"Replace it with your own nodes: keep **Mark Done** after them, through **Step Succeeded?**, and their error output wired to **Release Key**. "+stepSucceededNote+" Steps outside this database (an HTTP call, an email) run at least once: an attempt that dies after them and before **Mark Done** is run again by a retry, with the same key. "+passTheKey(r))
	}
	return append(lines, "Replace this node with your own. Keep its error output wired to **Release Key**: a failure gives the key up, so the provider's retry runs it again.",
		"At most once: an attempt that dies before its step commits keeps the key, and its event is lost. [at-most-once]("+Docs+"modes.md#at-most-once)")
}

// passTheKey says how a step outside the database does its effect once
// across attempts: it passes the key on to whoever does the effect.
func passTheKey(r resolved) string {
	key := keyExprOf(r)
	if r.Hashing == HashingKeysvc {
		key = keysvcKeyExpr
	}
	return "Pass it on so the target does the effect once: `{{ " + key + " }}` as the `Idempotency-Key` header (Stripe's API honours it), or an upsert on it. [Your own steps](" + Docs + "modes.md#your-own-steps)"
}

// cleanupNote explains a cleanup workflow that deletes what (keys, or
// finished inbox work).
func cleanupNote(r resolved, what string) []string {
	return []string{"## Cleanup", "",
		"Deletes " + what + " older than " + retentionText(r.Retention) + ", daily at 3:00, apart from the webhook so that a slow delete never delays a delivery. " +
			"Run it now with `idemhook cleanup --now`.",
		"Keep keys longer than the provider may resend an event (Stripe: up to 30 days from its CLI)."}
}

func retentionText(d time.Duration) string {
	return duration.Format(d)
}

// inboxNote says what one workflow of the inbox pattern does, and in which
// order they are published.
func inboxNote(r resolved, role string, lines ...string) []string {
	order := "worker, recoverer, receiver"
	if r.Receiver == ReceiverKeysvc {
		order = "worker, recoverer, target"
	}
	if r.OutboxURL != "" {
		order = "outbox, " + order
	}
	return append(append([]string{"## " + role, ""}, lines...), "",
		"Publish in this order (a workflow before those that call it): "+order+"; `idemhook deploy` does. [The inbox pattern]("+Docs+"inbox.md)")
}
