package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/idemhook/idemhook/internal/n8napi"
)

// Options tune Deploy and Check.
type Options struct {
	// CredentialIDs picks, among credentials that share a name and type,
	// the one to bind (--credential-id).
	CredentialIDs []string
	// WebhookURL is the base of the production URLs (n8n's WEBHOOK_URL, or
	// the webhook processes' address in queue mode); n8n's URL by default.
	WebhookURL string
	// LiveTimeout bounds each wait for a workflow to be published, for its
	// webhook to answer as registered, and for the probe to reach the
	// published version (30 s by default; see LiveWait).
	LiveTimeout time.Duration
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// Alternatives are the same files generated with other options (each
	// other guard): Check names the one a live workflow is, rather than
	// listing its differences as edits.
	Alternatives []Alternative
}

// Alternative is the files of other options than the ones checked.
type Alternative struct {
	// Options are the options that differ, as the command line gives
	// them: "--guard at-most-once".
	Options string
	// Change says what the checked options change against these, and
	// what to run to switch or to keep them.
	Change    string
	Workflows []Workflow
}

// ProductionURL is the production URL of a webhook on path: under
// WebhookURL, or n8n's URL.
func (o Options) ProductionURL(c *n8napi.Client, path string) string {
	base := c.BaseURL
	if o.WebhookURL != "" {
		base = strings.TrimSuffix(o.WebhookURL, "/")
	}
	return base + "/webhook/" + path
}

// LiveWait is LiveTimeout, or its default of 30 s.
func (o Options) LiveWait() time.Duration {
	if o.LiveTimeout == 0 {
		return 30 * time.Second
	}
	return o.LiveTimeout
}

// Progressf writes one progress line to Progress, if set.
func (o Options) Progressf(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

// Deployed is one workflow as n8n holds it after Deploy.
type Deployed struct {
	File, Name, ID string
	Created        bool
	// Unchanged: n8n already ran exactly these files' workflow, published;
	// Deploy changed nothing.
	Unchanged bool
	// URL is the production webhook URL to give the provider, if the
	// workflow has a webhook.
	URL string
	// Replaced is the alternative of Options whose workflow this one
	// replaced (another guard's), or nil.
	Replaced *Alternative
}

// Deploy creates or updates (by name) every workflow of ws in n8n, binds
// their credentials by id, points sub-workflow references at the ids n8n
// assigned, publishes them and waits until each webhook answers as
// registered. Running it again updates the same workflows in place.
//
// It fails before changing anything when a credential is missing
// (*MissingCredentialError) or ambiguous (*AmbiguousCredentialError), or a
// workflow name is ambiguous (*AmbiguousWorkflowError); a webhook path
// served by another workflow is a *PathTakenError, and a webhook that does
// not come live is ErrNotLive.
func Deploy(ctx context.Context, c *n8napi.Client, ws []Workflow, opts Options) ([]Deployed, error) {
	bound, err := Bind(ctx, c, ws, opts.CredentialIDs)
	if err != nil {
		return nil, err
	}
	existing, err := c.Workflows(ctx)
	if err != nil {
		return nil, err
	}
	targets, err := updateTargets(ws, existing)
	if err != nil {
		return nil, err
	}
	assigned := map[string]string{} // generated id → n8n id
	var out []Deployed
	for _, w := range ws {
		doc, err := prepare(w, bound, assigned)
		if err != nil {
			return out, err
		}
		d, err := put(ctx, c, w, doc, targets, existing, opts)
		if err != nil {
			return out, err
		}
		if w.GeneratedID != "" {
			assigned[w.GeneratedID] = d.ID
		}
		out = append(out, d)
	}
	return out, waitAllLive(ctx, out, opts)
}

// updateTargets finds, by name, the workflow in n8n each of ws updates: the
// one of that name, or the one its TargetID names. Several of one name,
// and no TargetID to choose, is an *AmbiguousWorkflowError.
func updateTargets(ws []Workflow, existing []n8napi.Workflow) (map[string]n8napi.Workflow, error) {
	targets := map[string]n8napi.Workflow{} // name → the workflow to update
	for _, w := range ws {
		var found []n8napi.Workflow
		for _, e := range existing {
			if e.Name == w.Doc.Name && !e.IsArchived {
				found = append(found, e)
			}
		}
		if len(found) > 1 && w.TargetID == "" {
			return nil, &AmbiguousWorkflowError{Name: w.Doc.Name, IDs: ids(found)}
		}
		if len(found) == 1 {
			targets[w.Doc.Name] = found[0]
		}
		if w.TargetID != "" {
			i := slices.IndexFunc(existing, func(e n8napi.Workflow) bool { return e.ID == w.TargetID })
			if i < 0 {
				return nil, fmt.Errorf("%s: workflow %s is not in n8n", w.File, w.TargetID)
			}
			targets[w.Doc.Name] = existing[i]
		}
	}
	return targets, nil
}

// put has n8n run doc, w's workflow prepared, published: it updates the
// workflow targets name for it, or creates one when there is none, and
// changes nothing when n8n runs doc already.
func put(ctx context.Context, c *n8napi.Client, w Workflow, doc n8napi.Workflow, targets map[string]n8napi.Workflow, existing []n8napi.Workflow, opts Options) (Deployed, error) {
	d := Deployed{File: w.File, Name: w.Doc.Name}
	e, ok := targets[w.Doc.Name]
	if ok && unchanged(doc, e) {
		d.ID, d.Unchanged = e.ID, true
		opts.Progressf("unchanged %s: %q (id %s, version %s)", w.File, w.Doc.Name, e.ID, e.VersionID)
		if w.WebhookPath != "" {
			d.URL = opts.ProductionURL(c, w.WebhookPath)
		}
		return d, nil
	}
	var version string
	if ok {
		d.Replaced = matchingAlternative(w.File, e.Live(), opts.Alternatives, nil)
		id := e.ID
		got, err := c.UpdateWorkflow(ctx, id, doc)
		if err != nil {
			return d, fmt.Errorf("update %s (%s): %w", w.File, id, err)
		}
		d.ID, version = got.ID, got.VersionID
		opts.Progressf("updated %s: %q (id %s, version %s)", w.File, w.Doc.Name, d.ID, version)
	} else {
		got, err := c.CreateWorkflow(ctx, doc)
		if err != nil {
			return d, fmt.Errorf("create %s: %w", w.File, err)
		}
		d.ID, d.Created, version = got.ID, true, got.VersionID
		opts.Progressf("created %s: %q (id %s, version %s)", w.File, w.Doc.Name, d.ID, version)
	}
	if err := publish(ctx, c, w, d.ID, existing); err != nil {
		return d, err
	}
	if err := waitPublished(ctx, c, d.ID, version, opts.LiveWait()); err != nil {
		return d, fmt.Errorf("publish %s (%s): %w", w.File, d.ID, err)
	}
	if w.WebhookPath != "" {
		d.URL = opts.ProductionURL(c, w.WebhookPath)
	}
	return d, nil
}

// publish publishes workflow id, w's, telling n8n's refusals apart: a
// webhook path another workflow serves is a *PathTakenError, and an
// Idempotency Guard type n8n did not load a *NodeTypeMissingError.
func publish(ctx context.Context, c *n8napi.Client, w Workflow, id string, existing []n8napi.Workflow) error {
	err := c.Publish(ctx, id)
	if err == nil {
		return nil
	}
	var apiErr *n8napi.Error
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusConflict && w.WebhookPath != "" {
		taken := &PathTakenError{Path: w.WebhookPath}
		if holder, ok := servingPath(existing, w.WebhookPath, id); ok {
			taken.WorkflowID, taken.WorkflowName = holder.ID, holder.Name
		}
		return taken
	}
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusBadRequest {
		// One type may begin another's name (CUSTOM.idempotencyGuard,
		// CUSTOM.idempotencyGuardPostgres): compare the whole word.
		if typ, ok := missingGuardType(apiErr.Message); ok {
			return &NodeTypeMissingError{Type: typ}
		}
	}
	return fmt.Errorf("publish %s (%s): %w", w.File, id, err)
}

// waitAllLive waits until the webhook of each deployed workflow answers as
// registered at its production URL.
func waitAllLive(ctx context.Context, out []Deployed, opts Options) error {
	for _, d := range out {
		if d.URL == "" {
			continue
		}
		if err := waitLive(ctx, d.URL, opts.LiveWait()); err != nil {
			return fmt.Errorf("%s (%s) at %s: %w", d.File, d.ID, d.URL, err)
		}
		opts.Progressf("live: %s", d.URL)
	}
	return nil
}

// unchanged tells whether e, as n8n holds it, is doc published: its draft
// is the published version and does not differ from doc.
func unchanged(doc, e n8napi.Workflow) bool {
	return e.Active && e.ActiveVersion != nil && e.ActiveVersion.VersionID == e.VersionID && len(Drift(doc, e)) == 0
}

// Bind finds in n8n the id of each credential the workflows use, by type
// and name (picked chooses among same-name ones), failing as Deploy does.
func Bind(ctx context.Context, c *n8napi.Client, ws []Workflow, picked []string) (map[CredentialRef]string, error) {
	creds, err := c.Credentials(ctx)
	if err != nil {
		return nil, err
	}
	return bindCredentials(Credentials(ws), creds, picked)
}

// bindCredentials finds the id of each (type, name) the workflows use.
func bindCredentials(refs []CredentialRef, creds []n8napi.Credential, picked []string) (map[CredentialRef]string, error) {
	bound := map[CredentialRef]string{}
	for _, ref := range refs {
		var ids []string
		for _, c := range creds {
			if c.Type == ref.Type && c.Name == ref.Name {
				ids = append(ids, c.ID)
			}
		}
		switch {
		case len(ids) == 0:
			return nil, &MissingCredentialError{Type: ref.Type, Name: ref.Name}
		case len(ids) == 1:
			bound[ref] = ids[0]
		default:
			var chosen []string
			for _, id := range ids {
				if slices.Contains(picked, id) {
					chosen = append(chosen, id)
				}
			}
			if len(chosen) != 1 {
				return nil, &AmbiguousCredentialError{Type: ref.Type, Name: ref.Name, IDs: ids}
			}
			bound[ref] = chosen[0]
		}
	}
	return bound, nil
}

// prepare returns w's document with credentials bound by id (a node bound
// to a credential by id already, as a user's own nodes are, keeps it),
// and sub-workflow and error workflow references pointing at the ids n8n
// assigned. w is not modified.
func prepare(w Workflow, bound map[CredentialRef]string, assigned map[string]string) (n8napi.Workflow, error) {
	doc, err := w.Doc.Clone()
	if err != nil {
		return n8napi.Workflow{}, err
	}
	if id, ok := doc.Settings["errorWorkflow"].(string); ok && id != "" {
		if n8nID, ok := assigned[id]; ok {
			doc.Settings["errorWorkflow"] = n8nID
		}
	}
	for _, n := range doc.Nodes {
		creds, _ := n["credentials"].(map[string]any)
		for typ, v := range creds {
			ref, _ := v.(map[string]any)
			name, _ := ref["name"].(string)
			if id, ok := bound[CredentialRef{Type: typ, Name: name}]; ok {
				ref["id"] = id
			}
		}
		if ref := subWorkflowRef(n); ref != nil {
			id, _ := ref["value"].(string)
			n8nID, ok := assigned[id]
			if !ok {
				return n8napi.Workflow{}, fmt.Errorf("%s: node %q runs workflow %s, which is not among the files deployed before it", w.File, n["name"], id)
			}
			ref["value"] = n8nID
		}
	}
	return doc, nil
}

// servingPath finds a published workflow other than self with a Webhook
// node on path.
func servingPath(ws []n8napi.Workflow, path, self string) (n8napi.Workflow, bool) {
	for _, w := range ws {
		if w.ID == self || !w.Active {
			continue
		}
		for _, n := range w.Nodes {
			if p, ok := param(n, "path"); ok && n["type"] == webhookType && strings.Trim(p, "/") == strings.Trim(path, "/") {
				return w, true
			}
		}
	}
	return n8napi.Workflow{}, false
}

// registered tells whether url answers as a registered POST webhook: a GET
// on it gets n8n's 404 "Did you mean to make a POST request?". The probe
// creates no execution.
func registered(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode == http.StatusNotFound && strings.Contains(string(b), "Did you mean to make a POST request?")
}

// waitPublished waits until n8n records version as the active one: the
// publish call can return before it does. Even then, deliveries can reach
// the previous version for a moment after an update: n8n's publication
// outbox applies it in the background, and the public API does not show
// when (the probe waits for it from the executions' version; verify never
// switches one workflow between versions).
func waitPublished(ctx context.Context, c *n8napi.Client, id, version string, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); ; {
		w, err := c.Workflow(ctx, id)
		if err != nil {
			return err
		}
		if w.Active && w.ActiveVersion != nil && (version == "" || w.ActiveVersion.VersionID == version) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: n8n still runs another version than %s", ErrNotLive, version)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func waitLive(ctx context.Context, url string, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); ; {
		if registered(ctx, url) {
			return nil
		}
		if time.Now().After(deadline) {
			return ErrNotLive
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// unrecognizedNodeType finds the type name in n8n's refusal to publish a
// workflow naming a node it did not load.
var unrecognizedNodeType = regexp.MustCompile(`Unrecognized node type: ([A-Za-z0-9_.@/-]+)`)

// missingGuardType returns the Idempotency Guard type n8n's message says
// it does not know, if that is what it says.
func missingGuardType(message string) (string, bool) {
	m := unrecognizedNodeType.FindStringSubmatch(message)
	if m == nil {
		return "", false
	}
	typ := strings.TrimRight(m[1], ".")
	_, ok := communitynode.OfType(typ)
	return typ, ok
}
