// Package n8napi is a small client for n8n's public REST API (/api/v1,
// header X-N8N-API-KEY): the credentials, workflows and executions that
// deploying and checking idemhook's workflows need, and nothing else.
//
// Every method returns an *Error when n8n answers outside 2xx, so callers
// can test the status (a 409 on publish is a webhook path taken by another
// workflow; a 401 is a wrong or expired API key).
package n8napi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client calls one n8n instance.
type Client struct {
	// BaseURL is n8n's URL without a trailing slash, e.g.
	// https://n8n.example.com.
	BaseURL string
	// APIKey is sent as X-N8N-API-KEY. It is never logged or printed.
	APIKey string
	HTTP   *http.Client
}

// New returns a client for baseURL; a trailing slash or /api/v1 suffix is
// accepted.
func New(baseURL, apiKey string) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("n8n URL %q: want http(s)://host[:port]", baseURL)
	}
	base := strings.TrimSuffix(strings.TrimSuffix(u.String(), "/"), "/api/v1")
	if strings.TrimSpace(apiKey) == "" {
		return nil, errors.New("empty n8n API key: create one in n8n (Settings → n8n API) and pass its file with --api-key-file")
	}
	return &Client{BaseURL: base, APIKey: strings.TrimSpace(apiKey), HTTP: &http.Client{Timeout: 30 * time.Second}}, nil
}

// Error is n8n's answer outside 2xx.
type Error struct {
	Method, Path string
	Status       int
	Message      string
}

func (e *Error) Error() string {
	msg := e.Message
	if e.Status == http.StatusUnauthorized {
		msg += " (is the API key right and not expired?)"
	}
	return fmt.Sprintf("n8n %s %s: %d %s", e.Method, e.Path, e.Status, msg)
}

// do sends body (if not nil) as JSON and decodes a 2xx answer into out (if
// not nil).
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+"/api/v1"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("X-N8N-API-KEY", c.APIKey)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("n8n %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("n8n %s %s: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(raw, &e) != nil || e.Message == "" {
			e.Message = strings.TrimSpace(string(raw[:min(len(raw), 300)]))
		}
		return &Error{Method: method, Path: path, Status: resp.StatusCode, Message: e.Message}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("n8n %s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

// list pages through a list endpoint (data + nextCursor).
func list[T any](ctx context.Context, c *Client, path string) ([]T, error) {
	var all []T
	cursor := ""
	for {
		p := path + "?limit=250"
		if strings.Contains(path, "?") {
			p = path + "&limit=250"
		}
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		var page struct {
			Data       []T    `json:"data"`
			NextCursor string `json:"nextCursor"`
		}
		if err := c.do(ctx, http.MethodGet, p, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Data...)
		if page.NextCursor == "" {
			return all, nil
		}
		cursor = page.NextCursor
	}
}

// Credential is a stored credential as the API lists it: never its data.
type Credential struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// Credentials lists every credential the API key may see.
func (c *Client) Credentials(ctx context.Context) ([]Credential, error) {
	return list[Credential](ctx, c, "/credentials")
}

// CreateCredential stores a credential of type typ; n8n encrypts data.
func (c *Client) CreateCredential(ctx context.Context, name, typ string, data map[string]any) (Credential, error) {
	var out Credential
	err := c.do(ctx, http.MethodPost, "/credentials", map[string]any{"name": name, "type": typ, "data": data}, &out)
	return out, err
}

// CredentialTest is the outcome of a credential's test: Status "OK" or
// "Error", and n8n's message (the credential type's own for an error it
// names).
type CredentialTest struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// TestCredential runs the test of stored credential id, as the editor's
// "Test" button does: the request its type declares, judged by its rules.
func (c *Client) TestCredential(ctx context.Context, id string) (CredentialTest, error) {
	var out CredentialTest
	err := c.do(ctx, http.MethodPost, "/credentials/"+url.PathEscape(id)+"/test", nil, &out)
	return out, err
}

// DeleteCredential deletes credential id.
func (c *Client) DeleteCredential(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/credentials/"+url.PathEscape(id), nil, nil)
}

// Workflow is a workflow as the API reads and writes it. Nodes stay
// generic maps: deploy rewrites credential ids and sub-workflow ids in
// them and passes everything else through untouched.
type Workflow struct {
	ID string `json:"id,omitempty"`
	// VersionID is the latest saved version (read only).
	VersionID   string           `json:"versionId,omitempty"`
	Name        string           `json:"name"`
	Active      bool             `json:"active,omitempty"`
	IsArchived  bool             `json:"isArchived,omitempty"`
	Nodes       []map[string]any `json:"nodes"`
	Connections map[string]any   `json:"connections"`
	Settings    map[string]any   `json:"settings"`
	// ActiveVersion is the published version, the one deliveries run
	// (read only; Nodes above are the latest draft).
	ActiveVersion *Version `json:"activeVersion,omitempty"`
}

// Version is one saved version of a workflow.
type Version struct {
	VersionID   string           `json:"versionId"`
	Nodes       []map[string]any `json:"nodes"`
	Connections map[string]any   `json:"connections"`
}

// Clone returns a deep copy of w, for changing nodes without touching w.
func (w Workflow) Clone() (Workflow, error) {
	raw, err := json.Marshal(w)
	if err != nil {
		return Workflow{}, err
	}
	var out Workflow
	err = json.Unmarshal(raw, &out)
	return out, err
}

// LiveNodes are the nodes deliveries run: the published version's, or the
// draft's when the workflow is not published.
func (w Workflow) LiveNodes() []map[string]any {
	if w.Active && w.ActiveVersion != nil {
		return w.ActiveVersion.Nodes
	}
	return w.Nodes
}

// Live is the version deliveries run, nodes and connections: the published
// one, or the draft when the workflow is not published.
func (w Workflow) Live() Workflow {
	if w.Active && w.ActiveVersion != nil && w.ActiveVersion.Connections != nil {
		w.Nodes, w.Connections = w.ActiveVersion.Nodes, w.ActiveVersion.Connections
	}
	return w
}

// writable is what the API accepts on create and update: it refuses the
// read-only fields (id, active, tags, …).
func (w Workflow) writable() map[string]any {
	settings := w.Settings
	if settings == nil {
		settings = map[string]any{}
	}
	return map[string]any{"name": w.Name, "nodes": w.Nodes, "connections": w.Connections, "settings": settings}
}

// Workflows lists every workflow (with nodes).
func (c *Client) Workflows(ctx context.Context) ([]Workflow, error) {
	return list[Workflow](ctx, c, "/workflows?excludePinnedData=true")
}

// Workflow reads one workflow.
func (c *Client) Workflow(ctx context.Context, id string) (Workflow, error) {
	var out Workflow
	err := c.do(ctx, http.MethodGet, "/workflows/"+url.PathEscape(id), nil, &out)
	return out, err
}

// WorkflowJSON reads one workflow as n8n answers it, every field kept (a
// backup before an edit).
func (c *Client) WorkflowJSON(ctx context.Context, id string) ([]byte, error) {
	var out json.RawMessage
	err := c.do(ctx, http.MethodGet, "/workflows/"+url.PathEscape(id), nil, &out)
	return out, err
}

// CreateWorkflow creates w and returns it with the id n8n assigned.
func (c *Client) CreateWorkflow(ctx context.Context, w Workflow) (Workflow, error) {
	var out Workflow
	err := c.do(ctx, http.MethodPost, "/workflows", w.writable(), &out)
	return out, err
}

// UpdateWorkflow replaces workflow id's name, nodes, connections and
// settings.
func (c *Client) UpdateWorkflow(ctx context.Context, id string, w Workflow) (Workflow, error) {
	var out Workflow
	err := c.do(ctx, http.MethodPut, "/workflows/"+url.PathEscape(id), w.writable(), &out)
	return out, err
}

// Publish publishes the workflow's latest version (n8n 1.x called it
// activating). A webhook path another workflow serves is a 409.
func (c *Client) Publish(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/workflows/"+url.PathEscape(id)+"/publish", map[string]any{}, nil)
}

// Unpublish takes workflow id off its triggers.
func (c *Client) Unpublish(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/workflows/"+url.PathEscape(id)+"/unpublish", map[string]any{}, nil)
}

// DeleteWorkflow unpublishes workflow id (n8n refuses to delete a
// published one) and deletes it, waiting up to 30 s while n8n answers 409
// "still being unpublished".
func (c *Client) DeleteWorkflow(ctx context.Context, id string) error {
	if err := c.Unpublish(ctx, id); err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		err := c.do(ctx, http.MethodDelete, "/workflows/"+url.PathEscape(id), nil, nil)
		var e *Error
		if !errors.As(err, &e) || e.Status != http.StatusConflict || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Execution is one run of a workflow.
type Execution struct {
	ID         ID        `json:"id"`
	WorkflowID string    `json:"workflowId"`
	Status     string    `json:"status"`
	Mode       string    `json:"mode"`
	StartedAt  time.Time `json:"startedAt"`
	// WorkflowVersionID is the version of the workflow that ran.
	WorkflowVersionID string `json:"workflowVersionId"`
}

// ID is an id the API sends as a number or a string (executions' ids are
// numbers).
type ID string

func (id *ID) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*id = ID(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("id %s: want a number or a string", b)
	}
	*id = ID(n.String())
	return nil
}

// Executions lists the workflow's executions, newest first.
func (c *Client) Executions(ctx context.Context, workflowID string) ([]Execution, error) {
	return list[Execution](ctx, c, "/executions?workflowId="+url.QueryEscape(workflowID))
}

// Run is what n8n recorded of one execution, node by node.
type Run struct {
	Execution
	// Outputs has, for each node that ran, the number of items it sent on
	// each of its outputs (summed over the node's runs).
	Outputs map[string][]int
	// Errors has each node that failed and its error message.
	Errors map[string]string
	// First has, for each node that sent items on its first output, the
	// first item's JSON; FirstBinary its binary properties.
	First map[string]map[string]any
	// JSON has, for each node that ran, the JSON of the items it sent on
	// each output (its error output last), over all its runs.
	JSON        map[string][][]map[string]any
	FirstBinary map[string]map[string]Binary
	// Took has, for each node that ran, the time n8n recorded for it
	// (summed over the node's runs).
	Took map[string]time.Duration
}

// Binary is a binary property of an item as n8n records it in execution
// data. A file n8n's binary data service keeps (filesystem, database or S3
// mode) has an ID ("filesystem-v2:…") and Data names the mode; one kept in
// memory (mode "default", or inline bytes a node returned) has its bytes in
// Data, base64, and no ID.
type Binary struct {
	MimeType      string `json:"mimeType"`
	FileName      string `json:"fileName,omitempty"`
	FileExtension string `json:"fileExtension,omitempty"`
	FileSize      string `json:"fileSize,omitempty"`
	FileType      string `json:"fileType,omitempty"`
	Bytes         int    `json:"bytes,omitempty"`
	ID            string `json:"id,omitempty"`
	Data          string `json:"data,omitempty"`
}

// Ran tells whether node ran in the execution.
func (r Run) Ran(node string) bool {
	_, ok := r.Outputs[node]
	return ok
}

// ExecutionRun reads execution id with its data.
func (c *Client) ExecutionRun(ctx context.Context, id ID) (Run, error) {
	var raw struct {
		Execution
		Data struct {
			ResultData struct {
				RunData map[string][]struct {
					Data struct {
						Main [][]json.RawMessage `json:"main"`
					} `json:"data"`
					Error *struct {
						Message string `json:"message"`
					} `json:"error"`
					ExecutionTime float64 `json:"executionTime"` // milliseconds
				} `json:"runData"`
			} `json:"resultData"`
		} `json:"data"`
	}
	if err := c.do(ctx, http.MethodGet, "/executions/"+url.PathEscape(string(id))+"?includeData=true", nil, &raw); err != nil {
		return Run{}, err
	}
	r := Run{Execution: raw.Execution, Outputs: map[string][]int{}, Errors: map[string]string{}, First: map[string]map[string]any{},
		FirstBinary: map[string]map[string]Binary{}, JSON: map[string][][]map[string]any{}, Took: map[string]time.Duration{}}
	for node, runs := range raw.Data.ResultData.RunData {
		var counts []int
		for _, run := range runs {
			for i, items := range run.Data.Main {
				for len(counts) <= i {
					counts = append(counts, 0)
				}
				counts[i] += len(items)
				for len(r.JSON[node]) <= i {
					r.JSON[node] = append(r.JSON[node], nil)
				}
				for _, raw := range items {
					var item struct {
						JSON map[string]any `json:"json"`
					}
					if json.Unmarshal(raw, &item) == nil {
						r.JSON[node][i] = append(r.JSON[node][i], item.JSON)
					}
				}
				if _, seen := r.First[node]; i == 0 && len(items) > 0 && !seen {
					var item struct {
						JSON   map[string]any    `json:"json"`
						Binary map[string]Binary `json:"binary"`
					}
					if json.Unmarshal(items[0], &item) == nil {
						r.First[node] = item.JSON
						if len(item.Binary) > 0 {
							r.FirstBinary[node] = item.Binary
						}
					}
				}
			}
			if run.Error != nil {
				r.Errors[node] = run.Error.Message
			}
			r.Took[node] += time.Duration(run.ExecutionTime * float64(time.Millisecond))
		}
		r.Outputs[node] = counts
	}
	return r, nil
}
