package verify

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idemhook/idemhook/internal/deploy"
	"github.com/idemhook/idemhook/internal/n8napi"
)

// expect checks that each run took the business branch exactly when want
// says, and that it reached the guard's decision at all.
func (r *runner) expect(runs []n8napi.Run, answers []answer, want []bool) (Status, string) {
	status := Pass
	var lines []string
	for i, run := range runs {
		line := r.describe(run, &answers[i])
		switch got := r.ranBusiness(run); {
		case !run.Ran(r.guard.Decides()):
			status, line = Fail, line+fmt.Sprintf(" — never reached %q", r.guard.Decides())
		case got && !want[i]:
			status, line = Fail, line+" — ran the business branch again"
		case !got && want[i]:
			status, line = Fail, line+" — did not run the business branch"
		}
		lines = append(lines, line)
	}
	return status, strings.Join(lines, "\n")
}

// replay is the seed's scenario: A, A again with another signature header,
// B: the business branch runs for the first and third only.
func (r *runner) replay(ctx context.Context) (Status, string, error) {
	a := event("evt_verify_"+r.nonce+"_A", r.nonce)
	b := event("evt_verify_"+r.nonce+"_B", r.nonce)
	answers, err := r.inTurn(ctx, a, a, b)
	if err != nil {
		return Fail, err.Error(), nil
	}
	runs, err := r.runs(ctx, len(answers))
	if err != nil {
		return Fail, err.Error(), nil
	}
	// The checks run in order and this one first: the first delivery of
	// A is a new event by construction.
	r.learnNewOutput(runs[0])
	status, seen := r.expect(runs, answers, []bool{true, false, true})
	return status, seen, nil
}

// withoutID: a body without id is keyed by its hash, so the same bytes
// twice are a duplicate.
func (r *runner) withoutID(ctx context.Context) (Status, string, error) {
	body := fmt.Appendf(nil, `{"object":"event","type":"ping","nonce":%q}`, r.nonce)
	answers, err := r.inTurn(ctx, body, body)
	if err != nil {
		return Fail, err.Error(), nil
	}
	runs, err := r.runs(ctx, len(answers))
	if err != nil {
		return Fail, err.Error(), nil
	}
	status, seen := r.expect(runs, answers, []bool{true, false})
	return status, seen, nil
}

// concurrent: simultaneous deliveries of one event run the business branch
// exactly once.
func (r *runner) concurrent(ctx context.Context) (Status, string, error) {
	bodies := make([][]byte, r.opts.Concurrency)
	for i := range bodies {
		bodies[i] = event("evt_verify_"+r.nonce+"_C", r.nonce)
	}
	answers := r.sendAll(ctx, bodies, len(bodies))
	runs, err := r.runs(ctx, len(bodies))
	if err != nil {
		return Fail, err.Error(), nil
	}
	business, reached := 0, 0
	var lines []string
	for _, run := range runs {
		if run.Ran(r.guard.Decides()) {
			reached++
		}
		if r.ranBusiness(run) {
			business++
			lines = append(lines, r.describe(run, nil))
		}
	}
	seen := fmt.Sprintf("%d executions, %d reached %q, the business branch ran in %d; %s", len(runs), reached, r.guard.Decides(), business, tally(answers))
	if len(lines) > 0 {
		seen += ":\n" + strings.Join(lines, "\n")
	}
	if business != 1 || reached != len(runs) {
		return Fail, seen, nil
	}
	return Pass, seen, nil
}

// distinct: every new event runs the business branch once.
func (r *runner) distinct(ctx context.Context) (Status, string, error) {
	bodies := make([][]byte, r.opts.Deliveries)
	for i := range bodies {
		bodies[i] = event(fmt.Sprintf("evt_verify_%s_D%d", r.nonce, i), r.nonce)
	}
	answers := r.sendAll(ctx, bodies, r.opts.Concurrency)
	runs, err := r.runs(ctx, len(bodies))
	if err != nil {
		return Fail, err.Error(), nil
	}
	var missed []string
	for _, run := range runs {
		if !r.ranBusiness(run) {
			missed = append(missed, r.describe(run, nil))
		}
	}
	seen := fmt.Sprintf("%d events, the business branch ran for %d; %s", len(runs), len(runs)-len(missed), tally(answers))
	if len(missed) > 0 {
		return Fail, seen + ":\n" + strings.Join(missed, "\n"), nil
	}
	return Pass, seen, nil
}

// failure runs a copy of the workflow whose first business node throws:
// the key must be released (the provider's retry reaches the business
// branch again); then, with the workflow restored, a retry runs the
// business branch once and the next is a duplicate.
func (r *runner) failure(ctx context.Context) (Status, string, error) {
	first := r.guard.FirstBusiness()
	if status, seen := r.failureApplies(first); status != Pass {
		return status, seen, nil
	}
	// The failing copy is a workflow of its own on another path: switching
	// one workflow between versions is not safe, as n8n can run the old
	// version for a while after the publish call returned.
	broken, err := throwing(r.original, first, r.guard.Webhook, r.path+"-verify-"+r.nonce)
	if err != nil {
		return Fail, "", err
	}
	restore, err := r.deployCopy(ctx, broken, r.path+"-verify-"+r.nonce)
	if err != nil {
		return Fail, "", fmt.Errorf("deploy the copy whose %q fails: %w", first, err)
	}
	defer restore()
	body := event("evt_verify_"+r.nonce+"_F", r.nonce)
	// The error workflow runs after a failed execution, in one of its own:
	// the provider's retry comes later than it. It has run before, for
	// the executions that failed on purpose (a duplicate stopped while the
	// first attempt held a lease), so its runs are counted from here.
	released, err := r.releases(ctx)
	if err != nil {
		return Fail, "", err
	}
	answers, err := r.sendFailing(ctx, body, released)
	if err != nil {
		return Fail, err.Error(), nil
	}
	runs, runsErr := r.runs(ctx, 2)
	restore()
	if runsErr != nil {
		return Fail, runsErr.Error(), nil
	}
	retries, err := r.inTurn(ctx, body, body)
	if err != nil {
		return Fail, err.Error(), nil
	}
	answers = append(answers, retries...)
	more, err := r.runs(ctx, 2)
	if err != nil {
		return Fail, err.Error(), nil
	}
	runs = append(runs, more...)
	status, seen := r.judgeFailure(runs, answers, first)
	return status, seen, nil
}

// deployCopy deploys workflow at path in place of the one under test, and
// returns what goes back to it: restore deletes the copy (once, however
// often it is called) and points the runner at the workflow under test
// again.
func (r *runner) deployCopy(ctx context.Context, workflow n8napi.Workflow, path string) (restore func(), err error) {
	mainID, mainPath, mainSeen := r.id, r.path, r.seen
	r.path, r.seen = path, 0
	if err := r.deploy(ctx, workflow); err != nil {
		r.id, r.path, r.seen = mainID, mainPath, mainSeen
		return nil, err
	}
	restored := false
	return func() {
		if restored {
			return
		}
		restored = true
		if err := r.t.API.DeleteWorkflow(ctx, r.id); err != nil {
			r.progress("could not delete the failing copy %s: %v", r.id, err)
		}
		r.id, r.path, r.seen = mainID, mainPath, mainSeen
	}, nil
}

// failureApplies tells whether failure can check the workflow, whose first
// business node is first: Pass, or else Skip or Fail and why not.
func (r *runner) failureApplies(first string) (Status, string) {
	if r.guard.Transactional {
		return Skip, fmt.Sprintf("not needed: the business write is in %q's own statement, so a failure rolls the reservation back with it and the provider's retry runs both again", r.guard.Reserve)
	}
	if first == "" {
		return Fail, fmt.Sprintf("%q sends a new event to no business node", r.guard.Decision)
	}
	call := r.guard.HandOff()
	if slices.Contains(r.guard.SubWorkflowCalls, first) {
		call = first
	}
	if call != "" {
		return Skip, fmt.Sprintf("not checked here: the new event goes on to another workflow (%q), which runs and retries it from the saved receipt; verify that workflow on its own", call)
	}
	if !r.guard.HasErrorOutput(first) && r.releaser == "" && !r.selfReleases {
		return Skip, fmt.Sprintf("weakness: %q has no error output and the workflow no error workflow that releases the key, so when it fails the key stays reserved and every retry of the provider is answered as a duplicate (the event is lost). Set its Settings → On Error to \"Continue (using error output)\" and release the key there (DELETE FROM %s WHERE key = …), or let idemhook guard put the guard in, which releases a failed execution's key from an error workflow", first, r.guard.EventsTable)
	}
	return Pass, ""
}

// sendFailing delivers body twice to the failing copy, each once the
// execution before has finished and, when an error workflow gives keys up,
// once it has (released is how many times it had before).
func (r *runner) sendFailing(ctx context.Context, body []byte, released int) ([]answer, error) {
	var answers []answer
	for i := range 2 {
		answers = append(answers, r.send(ctx, body))
		if _, err := r.finished(ctx, i+1); err != nil {
			return nil, err
		}
		if r.releaser != "" || r.selfReleases {
			released++
			if err := r.waitReleased(ctx, released); err != nil {
				return nil, err
			}
		}
	}
	return answers, nil
}

// judgeFailure reads the four runs of failure: the two on the failing
// copy must have run first and failed (the key released each time), the
// retry after the repair must run the business branch cleanly and the
// next must not run it again.
func (r *runner) judgeFailure(runs []n8napi.Run, answers []answer, first string) (Status, string) {
	status := Pass
	var lines []string
	for i, run := range runs {
		line := r.describe(run, &answers[i])
		failed := r.failed(run, first)
		switch {
		case i < 2 && !failed:
			status, line = Fail, line+fmt.Sprintf(" — %q did not run (and fail): the key was not released after the failure before it", first)
		case i == 2 && (!r.ranBusiness(run) || r.failed(run, first)):
			status, line = Fail, line+" — the retry after the repair did not run the business branch cleanly"
		case i == 3 && r.ranBusiness(run):
			status, line = Fail, line+" — ran the business branch a second time"
		}
		lines = append(lines, line)
	}
	return status, strings.Join(lines, "\n")
}

// releases counts the error workflow's finished executions (0 without
// one).
// releases counts the error workflow's finished runs: its nodes after the
// release are the user's (guard keeps a user's error workflow), which may
// fail after the key is given up. For a workflow that is its own error
// workflow, they are its runs in mode "error".
func (r *runner) releases(ctx context.Context) (int, error) {
	id := r.releaser
	if r.selfReleases {
		id = r.id
	}
	if id == "" {
		return 0, nil
	}
	execs, err := r.t.API.Executions(ctx, id)
	done := 0
	for _, e := range execs {
		finished := e.Status != "new" && e.Status != "running" && e.Status != "waiting"
		if finished && (!r.selfReleases || e.Mode == "error") {
			done++
		}
	}
	return done, err
}

// waitReleased waits until the error workflow has finished n executions.
func (r *runner) waitReleased(ctx context.Context, n int) error {
	for deadline := time.Now().Add(60 * time.Second); ; {
		done, err := r.releases(ctx)
		if err != nil {
			return err
		}
		if done >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the error workflow %s finished %d of %d releases within 60 s", r.releaser, done, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// failed tells whether node failed in run: an error n8n recorded, or items
// on its error output.
func (r *runner) failed(run n8napi.Run, node string) bool {
	if _, ok := run.Errors[node]; ok {
		return true
	}
	outs := run.Outputs[node]
	return r.guard.HasErrorOutput(node) && len(outs) > 1 && outs[len(outs)-1] > 0
}

// throwing returns a copy of w, named apart and served on path, whose node
// name is a Code node that throws, with the same name, position and error
// handling.
func throwing(w n8napi.Workflow, name, webhook, path string) (n8napi.Workflow, error) {
	doc, err := w.Clone()
	if err != nil {
		return w, err
	}
	doc.Name += " (failing copy)"
	for i, n := range doc.Nodes {
		if n["name"] == webhook {
			n["parameters"].(map[string]any)["path"] = path
			n["webhookId"] = deploy.NewUUID()
		} else if params, ok := n["parameters"].(map[string]any); ok && n["type"] == typeWebhook {
			// Another Webhook of the workflow, on a path of the copy's own:
			// the original serves its path.
			params["path"] = fmt.Sprintf("%s-%d", path, i)
			n["webhookId"] = deploy.NewUUID()
		}
		if n["name"] == name {
			doc.Nodes[i] = map[string]any{
				"name":        name,
				"id":          n["id"],
				"type":        "n8n-nodes-base.code",
				"typeVersion": 2,
				"position":    n["position"],
				"parameters":  map[string]any{"jsCode": "throw new Error('idemhook verify: this node fails on purpose');"},
			}
			if onError, ok := n["onError"].(string); ok {
				doc.Nodes[i]["onError"] = onError
			}
		}
	}
	return doc, nil
}
