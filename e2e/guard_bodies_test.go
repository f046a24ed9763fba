package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	idemdeploy "github.com/idemhook/idemhook/internal/deploy"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/guard"
	"github.com/idemhook/idemhook/internal/n8napi"
	"github.com/idemhook/idemhook/internal/sandbox"
)

// bodyKind is one kind of body a Webhook accepts, as a sender posts it.
type bodyKind struct {
	name, contentType string
	body              []byte
	header            map[string]string
	// noKey: the guard has nothing to key it by (an empty body): it runs
	// none of the user's nodes, where the original runs them.
	noKey bool
}

// guardBodyKinds are the deliveries of docs/guard.md's promise: JSON, a
// form, text, XML, files of several types (one named by its
// Content-Disposition), bytes without a content type, an empty body, and
// multipart forms with one and with two files beside text fields.
func guardBodyKinds(t *testing.T) []bodyKind {
	img := image.NewNRGBA(image.Rect(0, 0, 6, 6))
	for i := range 6 {
		img.Set(i, i, color.NRGBA{R: 200, G: uint8(40 * i), B: 30, A: 255})
	}
	var pngBuf bytes.Buffer
	if err := png.Encode(&pngBuf, img); err != nil {
		t.Fatal(err)
	}
	pngBytes := bytes.Clone(pngBuf.Bytes())
	img.Set(5, 0, color.NRGBA{G: 255, A: 255})
	pngBuf.Reset()
	if err := png.Encode(&pngBuf, img); err != nil {
		t.Fatal(err)
	}
	namedPNG := pngBuf.Bytes() // another event: the same bytes would be a duplicate
	pdf := []byte("%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n")
	octets := make([]byte, 300)
	for i := range octets {
		octets[i] = byte(i * 7)
	}
	multipart := func(boundary string, parts ...string) []byte {
		return []byte(strings.Join(parts, "") + "--" + boundary + "--\r\n")
	}
	field := func(boundary, name, value string) string {
		return "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + name + "\"\r\n\r\n" + value + "\r\n"
	}
	file := func(boundary, name, fileName, contentType string, data []byte) string {
		return "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + name + "\"; filename=\"" + fileName + "\"\r\nContent-Type: " + contentType + "\r\n\r\n" + string(data) + "\r\n"
	}
	const b = "----idemhookE2EGuardBoundary"
	return []bodyKind{
		{name: "json", contentType: "application/json", body: []byte(`{"id":"evt_guard_body","type":"invoice.paid","data":{"object":{"id":"in_1"}}}`)},
		{name: "urlencoded", contentType: "application/x-www-form-urlencoded", body: []byte("order=o_1&amount=12.50&note=two+words")},
		{name: "text", contentType: "text/plain; charset=utf-8", body: []byte("a plain-text delivery\nwith two lines\n")},
		{name: "xml", contentType: "application/xml", body: []byte(`<order id="o_1"><amount>12.50</amount></order>`)},
		{name: "png", contentType: "image/png", body: pngBytes},
		{name: "png named", contentType: "image/png", body: namedPNG, header: map[string]string{"Content-Disposition": `attachment; filename="scans/receipt 7.png"`}},
		{name: "pdf", contentType: "application/pdf", body: pdf},
		{name: "octet-stream", contentType: "application/octet-stream", body: octets},
		{name: "no content type", body: []byte("bytes sent with no Content-Type header")},
		{name: "empty", contentType: "application/json", noKey: true},
		{name: "multipart one file", contentType: "multipart/form-data; boundary=" + b,
			body: multipart(b, field(b, "customer", "Ann Example"), field(b, "note", "scanned"), file(b, "scan", "scan.png", "image/png", pngBytes))},
		{name: "multipart two files", contentType: "multipart/form-data; boundary=" + b,
			body: multipart(b, field(b, "customer", "Ann Example"), file(b, "scan", "scan.png", "image/png", pngBytes),
				file(b, "data", "invoice.pdf", "application/pdf", pdf), field(b, "tag", "a"), field(b, "tag", "b"))},
	}
}

// webhookShape is one way a user's Webhook is set up: its typeVersion and
// the options that change the item it gives.
type webhookShape struct {
	version        float64
	binaryProperty string // "" for n8n's default, data
	rawBody        bool   // the user already had the raw-body option on
}

func (w webhookShape) String() string {
	s := fmt.Sprintf("v%g", w.version)
	if w.binaryProperty != "" {
		s += "-property-" + w.binaryProperty
	}
	if w.rawBody {
		s += "-rawbody"
	}
	return s
}

// For every body kind, on Webhook typeVersions 1, 1.1, 2 and 2.1, with
// n8n's Binary Property name and another, and with the raw-body option the
// user already had: the first node after the guard gets the item the
// original Webhook gives (json; the same binary properties with the same
// metadata, stored the same way), in n8n's default binary data mode
// (filesystem). An empty body is the one delivery the guard cannot key: it
// runs none of the user's nodes.
func TestGuardBodies(t *testing.T) {
	needStack(t)
	var shapes []webhookShape
	for _, v := range []float64{1, 1.1, 2, 2.1} {
		shapes = append(shapes, webhookShape{version: v}, webhookShape{version: v, binaryProperty: "upload"}, webhookShape{version: v, rawBody: true})
	}
	testGuardBodies(t, "gb", shapes, guardBodyKinds(t), "filesystem-v2")
}

// The same promise with n8n's binary data kept in memory
// (N8N_DEFAULT_BINARY_DATA_MODE=default), where the Webhook gives a file's
// bytes inline: the guard's file is inline too.
func TestGuardBinaryModes(t *testing.T) {
	needStack(t)
	useStack(t, sandbox.Options{N8NEnv: map[string]string{"N8N_DEFAULT_BINARY_DATA_MODE": "default"}})
	var files []bodyKind
	for _, k := range guardBodyKinds(t) {
		if k.name != "json" && k.name != "text" {
			files = append(files, k)
		}
	}
	testGuardBodies(t, "gm", []webhookShape{{version: 1.1}, {version: 2.1}, {version: 2.1, binaryProperty: "upload"}}, files, "")
}

// testGuardBodies deploys, for each shape, the user's workflow (its Webhook,
// then a No Op) and its guarded copy side by side, posts every body to both
// and compares, from n8n's execution data, the item the No Op gets. storage
// is the binary data mode's id prefix the Webhook's files have ("" when
// they are inline).
func testGuardBodies(t *testing.T, prefix string, shapes []webhookShape, kinds []bodyKind, storage string) {
	ctx := context.Background()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, shape := range shapes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			t.Run(shape.String(), func(t *testing.T) {
				p := guardBodyPair(t, ctx, fmt.Sprintf("%s%02d", prefix, i), shape)
				for _, k := range kinds {
					p.compare(t, ctx, k, storage)
				}
			})
		}()
	}
	wg.Wait()
}

type bodyPair struct {
	shape               webhookShape
	origID, guardedID   string
	origPath, guardPath string
	restore, firstNode  string
	deployed            []string
}

func guardBodyPair(t *testing.T, ctx context.Context, name string, shape webhookShape) *bodyPair {
	t.Helper()
	options := map[string]any{}
	if shape.binaryProperty != "" {
		options["binaryPropertyName"] = shape.binaryProperty
	}
	if shape.rawBody {
		options["rawBody"] = true
	}
	path := "guard-body-" + name
	export := map[string]any{
		"name": "e2e guard bodies " + name,
		"nodes": []any{
			map[string]any{"id": idemdeploy.NewUUID(), "name": "Incoming", "type": "n8n-nodes-base.webhook", "typeVersion": shape.version,
				"position": []any{0, 0}, "webhookId": idemdeploy.NewUUID(),
				"parameters": map[string]any{"httpMethod": "POST", "path": path, "responseMode": "onReceived", "options": options}},
			map[string]any{"id": idemdeploy.NewUUID(), "name": "First Step", "type": "n8n-nodes-base.noOp", "typeVersion": 1,
				"position": []any{220, 0}, "parameters": map[string]any{}},
		},
		"connections": map[string]any{"Incoming": map[string]any{"main": []any{[]any{map[string]any{"node": "First Step", "type": "main", "index": 0}}}}},
		"settings":    map[string]any{"executionOrder": "v1"},
	}
	raw := mustJSON(t, export)
	w, err := guard.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	opts := generator.Options{CredentialName: credentialName, ReserveOptions: generator.ReserveOptions{Guard: generator.GuardAtMostOnce, EventsTable: name + "_events"}}
	res, err := guard.Guard(w, guard.Options{Generate: opts})
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, string(res.Files[guard.FileSchema]))
	execSQL(t, "TRUNCATE "+ident(opts.EventsTable)) // a run before this one (-count) delivered the same events
	p := &bodyPair{shape: shape, origPath: path + "-original", guardPath: path, restore: res.Restore, firstNode: "First Step"}

	original := workflowOf(t, raw)
	original.Name += " (original)"
	original.Nodes[0]["parameters"].(map[string]any)["path"] = p.origPath
	original.Nodes[0]["webhookId"] = idemdeploy.NewUUID()
	guarded := workflowOf(t, res.Workflow)
	errWF := workflowOf(t, res.Files[guard.FileErrorWorkflow])
	errWF.Name = "e2e guard bodies: " + errWF.Name
	for _, n := range []string{original.Name, guarded.Name, errWF.Name} {
		claimName(t, n)
	}
	p.origID = p.deploy(t, ctx, []idemdeploy.Workflow{{File: "original.json", Doc: original, WebhookPath: p.origPath}})
	ws, err := idemdeploy.Load(map[string][]byte{"guarded.json": mustJSON(t, guarded), guard.FileErrorWorkflow: mustJSON(t, errWF)})
	if err != nil {
		t.Fatal(err)
	}
	p.guardedID = p.deploy(t, ctx, ws)
	t.Cleanup(func() {
		for _, id := range p.deployed {
			api.DeleteWorkflow(context.WithoutCancel(ctx), id)
		}
	})
	return p
}

func (p *bodyPair) deploy(t *testing.T, ctx context.Context, ws []idemdeploy.Workflow) string {
	t.Helper()
	deployed, err := idemdeploy.Deploy(ctx, api, ws, idemdeploy.Options{WebhookURL: st.WebhookURL})
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	id := ""
	for _, d := range deployed {
		p.deployed = append(p.deployed, d.ID)
		if d.URL != "" {
			id = d.ID
		}
	}
	return id
}

// compare posts k to the original and to the guarded workflow and checks
// the item their first step gets.
func (p *bodyPair) compare(t *testing.T, ctx context.Context, k bodyKind, storage string) {
	t.Helper()
	orig := p.deliver(t, ctx, p.origID, p.origPath, k)
	guarded := p.deliver(t, ctx, p.guardedID, p.guardPath, k)
	if !orig.Ran(p.firstNode) {
		t.Fatalf("%s: the original workflow did not run %q: %v", k.name, p.firstNode, orig.Errors)
	}
	if k.noKey {
		if guarded.Ran(p.firstNode) {
			t.Errorf("%s: the guarded workflow ran %q for a delivery it has no key for", k.name, p.firstNode)
		}
		return
	}
	if !guarded.Ran(p.firstNode) {
		t.Errorf("%s: the guarded workflow did not run %q: %v", k.name, p.firstNode, guarded.Errors)
		return
	}
	want := normaliseItem(orig.First["Incoming"], p.origPath, p.guardPath)
	got := normaliseItem(guarded.First[p.restore], p.guardPath, p.guardPath)
	if !reflect.DeepEqual(want, got) {
		t.Errorf("%s: the item's json differs:\noriginal %v\nguarded  %v", k.name, want, got)
	}
	for _, d := range binaryDiff(orig.FirstBinary["Incoming"], guarded.FirstBinary[p.restore]) {
		t.Errorf("%s: %s", k.name, d)
	}
	for name, b := range orig.FirstBinary["Incoming"] {
		mode := storage
		if p.shape.rawBody && name == "data" && !strings.HasPrefix(k.contentType, "multipart/") {
			mode = "" // the raw-body option's bytes are inline
		}
		if !strings.HasPrefix(b.ID, mode) || (mode == "") != (b.ID == "") {
			t.Errorf("%s: the original's %s is stored as %q, want the %q mode", k.name, name, b.ID, mode)
		}
	}
}

// deliver posts k to path and reads the execution of workflow id it
// started.
func (p *bodyPair) deliver(t *testing.T, ctx context.Context, id, path string, k bodyKind) n8napi.Run {
	t.Helper()
	before, err := api.Executions(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := send(st.WebhookURL+"/webhook/"+path+"?via=e2e", k.contentType, k.body, k.header); err != nil {
		t.Fatalf("%s: %v", k.name, err)
	}
	c := guardCase{name: k.name}
	return c.runsSince(t, ctx, id, before, 1)[0]
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// indexedName is a file's name n8n numbers with the Binary Property option
// (upload0, upload1): it numbers a form's files in the order their writes
// to disk finish, which differs from one delivery to the next.
var indexedName = regexp.MustCompile(`^(.*?)[0-9]+$`)

// binaryDiff lists how got's binary properties differ from want's: names,
// metadata, and how they are stored. The storage id is compared by its mode
// only, a file name n8n drew at random (a UUID) only by its shape, and files
// n8n numbers as a set.
func binaryDiff(want, got map[string]n8napi.Binary) []string {
	var out []string
	norm := func(b n8napi.Binary) n8napi.Binary {
		if uuidPattern.MatchString(b.FileName) {
			b.FileName = "<random uuid>"
		}
		if mode, _, ok := strings.Cut(b.ID, ":"); ok {
			b.ID = mode + ":…"
		}
		return b
	}
	numbered := func(m map[string]n8napi.Binary) map[string]n8napi.Binary {
		out := map[string]n8napi.Binary{}
		byPrefix := map[string][]string{}
		for name := range m {
			if sub := indexedName.FindStringSubmatch(name); sub != nil && len(m) > 1 {
				byPrefix[sub[1]] = append(byPrefix[sub[1]], name)
			} else {
				out[name] = m[name]
			}
		}
		for prefix, names := range byPrefix {
			var files []string
			for _, n := range names {
				b, _ := json.Marshal(norm(m[n]))
				files = append(files, string(b))
			}
			slices.Sort(files)
			for i, f := range files {
				var b n8napi.Binary
				json.Unmarshal([]byte(f), &b)
				out[fmt.Sprintf("%s<any number>#%d", prefix, i)] = b
			}
		}
		return out
	}
	want, got = numbered(want), numbered(got)
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			out = append(out, fmt.Sprintf("binary %q is missing (got %v)", name, keysOf(got)))
			continue
		}
		if w, g := norm(w), norm(g); w != g {
			wj, _ := json.Marshal(w)
			gj, _ := json.Marshal(g)
			out = append(out, fmt.Sprintf("binary %q differs:\noriginal %s\nguarded  %s", name, wj, gj))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			out = append(out, fmt.Sprintf("binary %q is extra (the original has %v)", name, keysOf(want)))
		}
	}
	return out
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
