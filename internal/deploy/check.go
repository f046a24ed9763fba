package deploy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/idemhook/idemhook/internal/fingerprint"
	"github.com/idemhook/idemhook/internal/n8napi"
)

const stickyNoteType = "n8n-nodes-base.stickyNote"

// Problem is one thing Check found wrong, and what to do about it.
type Problem struct {
	// Workflow is the file the problem is about ("" for the instance).
	Workflow string
	What     string
	Fix      string
	// Drift: the workflow is there, but not as the files describe it.
	Drift bool
}

func (p Problem) String() string {
	where := p.Workflow
	if where == "" {
		where = "n8n"
	}
	return fmt.Sprintf("%s: %s. %s", where, p.What, p.Fix)
}

// Check verifies, without changing anything, that every workflow of ws is
// in n8n (by name), is the workflow the files describe (node by node, see
// Drift), is bound to credentials that exist and are unambiguous (among
// same-name ones, opts.CredentialIDs names the chosen), is published, and is
// live at its production URL (a path served by another workflow is named,
// and so is a path no workflow serves). It returns the problems found; an
// error means n8n could not be asked.
func Check(ctx context.Context, c *n8napi.Client, ws []Workflow, opts Options) ([]Problem, error) {
	creds, err := c.Credentials(ctx)
	if err != nil {
		return nil, err
	}
	existing, err := c.Workflows(ctx)
	if err != nil {
		return nil, err
	}
	var problems []Problem
	ambiguous := map[CredentialRef]bool{}
	assigned := assignedIDs(ws, existing)
	for _, w := range ws {
		live, missing := liveWorkflow(w, existing)
		if missing != nil {
			problems = append(problems, *missing)
			continue
		}
		drift, err := driftProblems(w, live, assigned, opts.Alternatives)
		if err != nil {
			return nil, err
		}
		problems = append(problems, drift...)
		problems = append(problems, credentialProblems(w, live, creds, opts.CredentialIDs, ambiguous)...)
		problems = append(problems, servingProblems(ctx, c, w, live, existing, opts)...)
	}
	return problems, nil
}

// problem is a problem with w, its fix formatted from fix and args.
func problem(w Workflow, what, fix string, args ...any) Problem {
	return Problem{Workflow: w.File, What: what, Fix: fmt.Sprintf(fix, args...)}
}

// assignedIDs points the files' sub-workflow references at the workflows
// n8n holds under the same names, as deploy points them: generated id →
// n8n id.
func assignedIDs(ws []Workflow, existing []n8napi.Workflow) map[string]string {
	assigned := map[string]string{}
	for _, w := range ws {
		for _, e := range existing {
			if e.Name == w.Doc.Name && !e.IsArchived && w.GeneratedID != "" {
				assigned[w.GeneratedID] = e.ID
			}
		}
	}
	return assigned
}

// liveWorkflow returns the workflow n8n holds under w's name, or the
// problem that it holds none or several.
func liveWorkflow(w Workflow, existing []n8napi.Workflow) (n8napi.Workflow, *Problem) {
	var found []n8napi.Workflow
	for _, e := range existing {
		if e.Name == w.Doc.Name && !e.IsArchived {
			found = append(found, e)
		}
	}
	if len(found) == 0 {
		p := problem(w, fmt.Sprintf("no workflow named %q", w.Doc.Name), "Run idemhook deploy with the same options.")
		return n8napi.Workflow{}, &p
	}
	if len(found) > 1 {
		err := &AmbiguousWorkflowError{Name: w.Doc.Name, IDs: ids(found)}
		p := problem(w, err.Error(), "Then run idemhook deploy again.")
		return n8napi.Workflow{}, &p
	}
	return found[0], nil
}

// driftProblems lists where live is not the workflow w's file describes,
// the file's sub-workflow references pointed at the assigned ids, and says
// where the differences come from: only the notes' text (another idemhook
// version wrote them), a workflow idemhook generated and nobody edited since
// (another version or other options: its recorded fingerprint matches its
// nodes), the same files with other options (alternatives), or an edit.
func driftProblems(w Workflow, live n8napi.Workflow, assigned map[string]string, alternatives []Alternative) ([]Problem, error) {
	want, err := withAssignedIDs(w.Doc, assigned)
	if err != nil {
		return nil, err
	}
	live = live.Live()
	differences := Drift(want, live)
	if len(differences) == 0 {
		return nil, nil
	}
	drift := func(what, fix string) Problem { return Problem{Workflow: w.File, What: what, Fix: fix, Drift: true} }
	if len(Drift(withoutNotes(want), withoutNotes(live))) == 0 {
		return []Problem{drift("only the sticky notes' text differs from what these options give: another idemhook version wrote it (not an edit; nothing the workflow does differs)",
			"Run idemhook deploy with these options to update the notes.")}, nil
	}
	if alt := matchingAlternative(w.File, live, alternatives, assigned); alt != nil {
		return []Problem{drift("this is the workflow of "+alt.Options+", not of these options (nothing edited). "+alt.Change,
			"To switch, apply the schema these options give (idemhook schema [these options] | psql …: it changes the events table in place), then run idemhook deploy with these options; to keep it, check with "+alt.Options+".")}, nil
	}
	fix := "Run idemhook deploy with these options to put them live (it replaces the edits), or check with the options it was deployed with."
	if recorded := fingerprint.Recorded(fingerprintOf(live)); recorded != "" && recorded == fingerprint.Of(fingerprintOf(live)) {
		fix = "Not edited since idemhook generated it (its nodes match the fingerprint idemhook wrote): an older idemhook or other options. Run idemhook deploy with these options to replace it with what they give, or check with the options it was generated with."
	}
	var problems []Problem
	for _, d := range differences {
		problems = append(problems, drift(d, fix))
	}
	return problems, nil
}

// matchingAlternative is the alternative whose file is live, notes aside,
// or nil.
func matchingAlternative(file string, live n8napi.Workflow, alternatives []Alternative, assigned map[string]string) *Alternative {
	for i, alt := range alternatives {
		for _, other := range alt.Workflows {
			if other.File != file {
				continue
			}
			if a, err := withAssignedIDs(other.Doc, assigned); err == nil && len(Drift(withoutNotes(a), withoutNotes(live))) == 0 {
				return &alternatives[i]
			}
		}
	}
	return nil
}

// withAssignedIDs is a copy of doc whose sub-workflow references point at
// the ids n8n assigned.
func withAssignedIDs(doc n8napi.Workflow, assigned map[string]string) (n8napi.Workflow, error) {
	out, err := doc.Clone()
	if err != nil {
		return n8napi.Workflow{}, err
	}
	for _, n := range out.Nodes {
		if ref := subWorkflowRef(n); ref != nil {
			if id, ok := assigned[fmt.Sprint(ref["value"])]; ok {
				ref["value"] = id
			}
		}
	}
	return out, nil
}

// withoutNotes is w without its sticky notes, which explain and do nothing.
func withoutNotes(w n8napi.Workflow) n8napi.Workflow {
	w.Nodes = slices.DeleteFunc(slices.Clone(w.Nodes), func(n map[string]any) bool { return n["type"] == stickyNoteType })
	return w
}

func fingerprintOf(w n8napi.Workflow) fingerprint.Workflow {
	return fingerprint.Workflow{Nodes: w.Nodes, Connections: w.Connections, Settings: w.Settings}
}

// credentialProblems lists the credentials live's nodes are bound to that
// are missing, gone, or ambiguous (among same-name ones, picked names the
// chosen). An ambiguous credential is a problem of the instance, told once:
// ambiguous holds those told already.
func credentialProblems(w Workflow, live n8napi.Workflow, creds []n8napi.Credential, picked []string, ambiguous map[CredentialRef]bool) []Problem {
	var problems []Problem
	for _, n := range live.LiveNodes() {
		nodeCreds, _ := n["credentials"].(map[string]any)
		for typ, v := range nodeCreds {
			ref, _ := v.(map[string]any)
			id, _ := ref["id"].(string)
			name, _ := ref["name"].(string)
			same := sameName(creds, typ, name)
			switch {
			case id == "":
				problems = append(problems, problem(w, fmt.Sprintf("node %q has no %s credential bound (n8n refuses every delivery: \"uses invalid credential\")", n["name"], typ),
					"Run idemhook deploy, which binds credentials by id."))
			case !hasID(creds, id) && len(same) == 0:
				problems = append(problems, problem(w, fmt.Sprintf("node %q is bound to %s credential %s, which no longer exists, and no %s credential is named %q", n["name"], typ, id, typ, name),
					"Create it (in n8n: Credentials → Add, named %q), then run idemhook deploy to bind it.", name))
			case !hasID(creds, id):
				problems = append(problems, problem(w, fmt.Sprintf("node %q is bound to %s credential %s, which no longer exists", n["name"], typ, id),
					"Run idemhook deploy to bind the current one."))
			case len(same) > 1 && slices.Contains(picked, id):
				// The one --credential-id chose.
			case len(same) > 1 && !ambiguous[CredentialRef{typ, name}]:
				ambiguous[CredentialRef{typ, name}] = true
				problems = append(problems, Problem{What: fmt.Sprintf("%d %s credentials are named %q (ids %s); the workflows use %s", len(same), typ, name, strings.Join(same, ", "), id),
					Fix: "Rename or delete the others: an import by name (n8n's CLI, the editor's import) leaves such nodes unbound."})
			}
		}
	}
	return problems
}

// servingProblems tells why live does not serve w's webhook at its
// production URL: its path is served by another workflow, it is not
// published, it serves another path, or the URL does not answer as a
// registered webhook.
func servingProblems(ctx context.Context, c *n8napi.Client, w Workflow, live n8napi.Workflow, existing []n8napi.Workflow, opts Options) []Problem {
	var holder n8napi.Workflow
	taken := false
	if w.WebhookPath != "" {
		holder, taken = servingPath(existing, w.WebhookPath, live.ID)
	}
	livePath := ""
	for _, n := range live.LiveNodes() {
		if p, ok := param(n, "path"); ok && n["type"] == webhookType {
			livePath = strings.Trim(p, "/")
		}
	}
	switch {
	case taken:
		return []Problem{problem(w, fmt.Sprintf("webhook path %q is served by workflow %q (id %s)", w.WebhookPath, holder.Name, holder.ID),
			"Unpublish that workflow, or generate with another --path and redeploy.")}
	case !live.Active:
		return []Problem{problem(w, fmt.Sprintf("workflow %s is not published", live.ID), "Publish it in the editor, or run idemhook deploy.")}
	case w.WebhookPath != "" && livePath != strings.Trim(w.WebhookPath, "/"):
		return []Problem{problem(w, fmt.Sprintf("no workflow serves webhook path %q: workflow %q (id %s) serves %q", w.WebhookPath, live.Name, live.ID, livePath),
			"Check with the --path it was deployed with, or run idemhook deploy to move it.")}
	case w.WebhookPath != "":
		url := opts.ProductionURL(c, w.WebhookPath)
		if !registered(ctx, url) {
			return []Problem{problem(w, fmt.Sprintf("%s does not answer as a registered webhook", url),
				"Check n8n's log for the publication of workflow %s, and --webhook-url if deliveries go through another address.", live.ID)}
		}
	}
	return nil
}

func ids(ws []n8napi.Workflow) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.ID
	}
	return out
}

func sameName(creds []n8napi.Credential, typ, name string) []string {
	var out []string
	for _, c := range creds {
		if c.Type == typ && c.Name == name {
			out = append(out, c.ID)
		}
	}
	return out
}

func hasID(creds []n8napi.Credential, id string) bool {
	for _, c := range creds {
		if c.ID == id {
			return true
		}
	}
	return false
}
