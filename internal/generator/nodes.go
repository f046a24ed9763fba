package generator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/idemhook/idemhook/internal/fingerprint"
	"github.com/tidwall/pretty"
)

// Node types and the latest typeVersion of each in n8n 2.41 (verified against
// the n8n-nodes-base package by the e2e tests).
const (
	typeWebhook  = "n8n-nodes-base.webhook"
	typeCode     = "n8n-nodes-base.code"
	typePostgres = "n8n-nodes-base.postgres"
	typeIf       = "n8n-nodes-base.if"
	typeRespond  = "n8n-nodes-base.respondToWebhook"
	typeCrypto   = "n8n-nodes-base.crypto"
	typeSet      = "n8n-nodes-base.set"
	typeSchedule = "n8n-nodes-base.scheduleTrigger"
	typeExecTrig = "n8n-nodes-base.executeWorkflowTrigger"
	typeHTTP     = "n8n-nodes-base.httpRequest"

	typeExecWorkflow = "n8n-nodes-base.executeWorkflow"
	typeStopAndError = "n8n-nodes-base.stopAndError"
	typeNoOp         = "n8n-nodes-base.noOp"
	typeErrorTrigger = "n8n-nodes-base.errorTrigger"
)

// TypeVersions maps every node type the generator emits to its typeVersion.
var TypeVersions = map[string]float64{
	typeWebhook:  2.1,
	typeCode:     2,
	typePostgres: 2.7,
	typeIf:       2.3,
	typeRespond:  1.5,
	typeCrypto:   2,
	typeSet:      3.5,
	typeSchedule: 1.4,
	typeExecTrig: 1.2,
	typeHTTP:     4.5,

	typeExecWorkflow: 1.4,
	typeStopAndError: 1,
	typeNoOp:         1,
	typeErrorTrigger: 1,
	typeSticky:       1,

	// The Idempotency Guard of either package, under either name n8n loads
	// it by: version 2, whose default operation is a lease (node.go writes
	// the operation in every case).
	communitynode.KeysvcType:         communitynode.NodeVersion,
	communitynode.KeysvcCustomType:   communitynode.NodeVersion,
	communitynode.PostgresType:       communitynode.NodeVersion,
	communitynode.PostgresCustomType: communitynode.NodeVersion,
}

type credentialRef struct {
	// ID is always null: n8n resolves the credential by name on import, and
	// a lab's credential id must never leak into a shared workflow.
	ID   *string `json:"id"`
	Name string  `json:"name"`
}

type node struct {
	Parameters  map[string]any           `json:"parameters"`
	ID          string                   `json:"id"`
	Name        string                   `json:"name"`
	Type        string                   `json:"type"`
	TypeVersion float64                  `json:"typeVersion"`
	Position    [2]int                   `json:"position"`
	WebhookID   string                   `json:"webhookId,omitempty"`
	Credentials map[string]credentialRef `json:"credentials,omitempty"`
	// OnError "continueErrorOutput" gives the node a second, error output.
	OnError string `json:"onError,omitempty"`
	// ExecuteOnce runs the node for the first input item only.
	ExecuteOnce bool `json:"executeOnce,omitempty"`
	// AlwaysOutputData makes the node output an empty item when it has no
	// result (the Postgres node outputs nothing for a SELECT of no rows), so
	// the branch after it still runs.
	AlwaysOutputData bool `json:"alwaysOutputData,omitempty"`
	// Notes are the node's own notes (its settings' Notes field): the first
	// node's carry the workflow's fingerprint (fingerprint.Note).
	Notes string `json:"notes,omitempty"`
}

type link struct {
	Node  string `json:"node"`
	Type  string `json:"type"`
	Index int    `json:"index"`
}

// graph collects nodes and connections, then renders the workflow JSON.
type graph struct {
	seed  string // makes node ids unique to one workflow
	nodes []node
	conns map[string][][]link
	// col is the column a section of nodes starts after: the Webhook's,
	// then the last column of the signature check or of the key nodes, so
	// that each section lays itself out without knowing what came before.
	col int
	// notes go on the canvas above the nodes (placedNotes).
	notes []stickyNote
}

// at places a node on the canvas, col columns right of g.col: columns 220 px
// apart, rows 180 px apart, row 0 the path of a new event, rows below it the
// other answers.
func (g *graph) at(col, row int) [2]int {
	return [2]int{(g.col + col) * 220, 300 + row*180}
}

func newGraph(seed string) *graph {
	return &graph{seed: seed, conns: map[string][][]link{}}
}

func (g *graph) add(n node) {
	n.ID = UUIDFrom(g.seed + "/node/" + n.Name)
	n.TypeVersion = TypeVersions[n.Type]
	g.nodes = append(g.nodes, n)
}

// addNode adds n and returns its name, for a node whose name its maker
// chose (an answerer's).
func (g *graph) addNode(n node) string {
	g.add(n)
	return n.Name
}

// connect wires output number out of from to the main input of to.
func (g *graph) connect(from string, out int, to string) {
	outs := g.conns[from]
	for len(outs) <= out {
		outs = append(outs, []link{})
	}
	outs[out] = append(outs[out], link{Node: to, Type: "main", Index: 0})
	g.conns[from] = outs
}

// document is an importable n8n workflow, in the field order n8n exports.
type document struct {
	ID          string                         `json:"id"`
	Name        string                         `json:"name"`
	Nodes       []node                         `json:"nodes"`
	Connections map[string]map[string][][]link `json:"connections"`
	Active      bool                           `json:"active"`
	Settings    map[string]any                 `json:"settings"`
	PinData     struct{}                       `json:"pinData"`
	Meta        map[string]string              `json:"meta"`
}

// marshal writes v as JSON, laid out like n8n's exports.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep the Code node's "<" and "&" readable
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return pretty.PrettyOptions(buf.Bytes(), &pretty.Options{Width: 100, Indent: "  "}), nil
}

// render assembles the importable workflow document, with the execution
// settings of x.
func (g *graph) render(id, name string, x Executions) ([]byte, error) {
	doc := document{
		ID: id, Name: name, Nodes: append(slices.Clone(g.nodes), g.placedNotes()...),
		Connections: map[string]map[string][][]link{},
		Settings:    x.settings(),
		Meta:        map[string]string{"generatedBy": "idemhook"},
	}
	for from, outs := range g.conns {
		doc.Connections[from] = map[string][][]link{"main": outs}
	}
	raw, err := marshal(doc)
	if err == nil && len(doc.Nodes) > 0 {
		// The fingerprint leaves notes out: writing it changes nothing it covers.
		var w fingerprint.Workflow
		if err = json.Unmarshal(raw, &w); err == nil {
			doc.Nodes[0].Notes = fingerprint.Note(fingerprint.Of(w))
			raw, err = marshal(doc)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("render workflow %q: %w", name, err)
	}
	return raw, nil
}

func credentials(name string) map[string]credentialRef {
	return map[string]credentialRef{"postgres": {Name: name}}
}

// ifCondition is the filter parameter of an If node (v2.3 uses filter
// version 3).
func ifCondition(seed, left string, operator map[string]any, right any) map[string]any {
	return map[string]any{
		"conditions": map[string]any{
			"options": map[string]any{"caseSensitive": true, "leftValue": "", "typeValidation": "strict", "version": 3},
			"conditions": []any{map[string]any{
				"id":         UUIDFrom(seed),
				"leftValue":  left,
				"rightValue": right,
				"operator":   operator,
			}},
			"combinator": "and",
		},
		"options": map[string]any{},
	}
}

func ifNode(g *graph, name string, pos [2]int, left string, operator map[string]any, right any) node {
	return node{Name: name, Type: typeIf, Position: pos, Parameters: ifCondition(g.seed+"/cond/"+name, left, operator, right)}
}

var (
	opStringExist    = map[string]any{"type": "string", "operation": "exists", "singleValue": true}
	opStringNotEmpty = map[string]any{"type": "string", "operation": "notEmpty", "singleValue": true}
	opStringEq       = map[string]any{"type": "string", "operation": "equals"}
	opBooleanTrue    = map[string]any{"type": "boolean", "operation": "true", "singleValue": true}
	opNumberGt       = map[string]any{"type": "number", "operation": "gt"}
)

// respondNode answers the webhook with status (a number or an expression)
// and a JSON body expression.
func respondNode(name string, pos [2]int, status any, body string, headers ...[2]string) node {
	options := map[string]any{"responseCode": status}
	if len(headers) > 0 {
		var entries []map[string]string
		for _, h := range headers {
			entries = append(entries, map[string]string{"name": h[0], "value": h[1]})
		}
		options["responseHeaders"] = map[string]any{"entries": entries}
	}
	return node{Name: name, Type: typeRespond, Position: pos, Parameters: map[string]any{
		"respondWith":  "json",
		"responseBody": body,
		"options":      options,
	}}
}

// postgresNode runs query with $1… bound from replacement, an array
// expression (a plain comma list would split keys that contain commas).
func postgresNode(name string, pos [2]int, query, replacement, credential string) node {
	options := map[string]any{}
	if replacement != "" {
		options["queryReplacement"] = replacement
	}
	return node{Name: name, Type: typePostgres, Position: pos, Credentials: credentials(credential), Parameters: map[string]any{
		"operation": "executeQuery",
		"query":     query,
		"options":   options,
	}}
}
