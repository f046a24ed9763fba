package deploy

import (
	"context"
	"fmt"
	"strings"

	"github.com/idemhook/idemhook/n8napi"
)

// Problem is one thing Check found wrong, and what to do about it.
type Problem struct {
	// Workflow is the file the problem is about ("" for the instance).
	Workflow string
	What     string
	Fix      string
}

func (p Problem) String() string {
	where := p.Workflow
	if where == "" {
		where = "n8n"
	}
	return fmt.Sprintf("%s: %s. %s", where, p.What, p.Fix)
}

// Check verifies, without changing anything, that every workflow of ws is
// in n8n (by name), bound to credentials that exist and are unambiguous,
// published, and live at its production URL (a path served by another
// workflow is named). It returns the problems found; an error means n8n
// could not be asked.
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
	add := func(w Workflow, what, fix string, args ...any) {
		problems = append(problems, Problem{Workflow: w.File, What: what, Fix: fmt.Sprintf(fix, args...)})
	}
	for _, w := range ws {
		var found []n8napi.Workflow
		for _, e := range existing {
			if e.Name == w.Doc.Name && !e.IsArchived {
				found = append(found, e)
			}
		}
		if len(found) == 0 {
			add(w, fmt.Sprintf("no workflow named %q", w.Doc.Name), "Run idemhook deploy with the same options.")
			continue
		}
		if len(found) > 1 {
			err := &AmbiguousWorkflowError{Name: w.Doc.Name, IDs: ids(found)}
			add(w, err.Error(), "Then run idemhook deploy again.")
			continue
		}
		live := found[0]
		for _, n := range live.LiveNodes() {
			nodeCreds, _ := n["credentials"].(map[string]any)
			for typ, v := range nodeCreds {
				ref, _ := v.(map[string]any)
				id, _ := ref["id"].(string)
				name, _ := ref["name"].(string)
				same := sameName(creds, typ, name)
				switch {
				case id == "":
					add(w, fmt.Sprintf("node %q has no %s credential bound (n8n refuses every delivery: \"uses invalid credential\")", n["name"], typ),
						"Run idemhook deploy, which binds credentials by id.")
				case !hasID(creds, id):
					add(w, fmt.Sprintf("node %q is bound to %s credential %s, which no longer exists", n["name"], typ, id),
						"Run idemhook deploy to bind the current one.")
				case len(same) > 1 && !ambiguous[CredentialRef{typ, name}]:
					ambiguous[CredentialRef{typ, name}] = true
					problems = append(problems, Problem{What: fmt.Sprintf("%d %s credentials are named %q (ids %s); the workflows use %s", len(same), typ, name, strings.Join(same, ", "), id),
						Fix: "Rename or delete the others: an import by name (n8n's CLI, the editor's import) leaves such nodes unbound."})
				}
			}
		}
		var holder n8napi.Workflow
		taken := false
		if w.WebhookPath != "" {
			holder, taken = servingPath(existing, w.WebhookPath, live.ID)
		}
		switch {
		case taken:
			add(w, fmt.Sprintf("webhook path %q is served by workflow %q (id %s)", w.WebhookPath, holder.Name, holder.ID),
				"Unpublish that workflow, or generate with another --path and redeploy.")
		case !live.Active:
			add(w, fmt.Sprintf("workflow %s is not published", live.ID), "Publish it in the editor, or run idemhook deploy.")
		case w.WebhookPath != "":
			url := opts.ProductionURL(c, w.WebhookPath)
			if !registered(ctx, url) {
				add(w, fmt.Sprintf("%s does not answer as a registered webhook", url),
					"Check n8n's log for the publication of workflow %s, and --webhook-url if deliveries go through another address.", live.ID)
			}
		}
	}
	return problems, nil
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
