// Package lab runs idemhook on one machine for trying it out: PostgreSQL
// 16 and n8n from the e2e stack's provisioning, keysvc in process, an n8n
// owner account and API key, the credentials the workflows use, their
// schema, and the workflows deployed through n8n's public API.
package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/idemhook/idemhook/internal/deploy"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/internal/n8napi"
	"github.com/idemhook/idemhook/internal/sandbox"
	"github.com/idemhook/idemhook/signature"
)

// Lab is a running lab. Close stops all of it.
type Lab struct {
	// EditorURL is n8n's editor; Email and Password log in to it.
	EditorURL, Email, Password string
	// APIKey is the n8n API key deploy used (for idemhook check).
	APIKey string
	// KeysvcURL and KeysvcToken reach keysvc (reservations, inbox reads).
	KeysvcURL, KeysvcToken string
	// SigningSecret is the secret of the workflows' signature check, when
	// they verify one (--verify, or the inbox pattern).
	SigningSecret string
	// API is n8n's public API with APIKey.
	API *n8napi.Client
	// WebhookURL is the base of the production webhook URLs.
	WebhookURL string
	// DatabaseURL is the business database (schema, events, orders).
	DatabaseURL string
	Deployed    []deploy.Deployed
	Options     generator.Options
	LogDir      string
	// Dir is the lab's own folder (mode 0700): APIKeyFile, and keysvc's
	// endpoints file when keysvc receives. Close removes it.
	Dir, APIKeyFile string
	// Outbox records the inbox pattern's outbox calls, when the options
	// name no outbox URL of their own.
	Outbox *Recorder
	// InboxURL is keysvc's inbox route the provider posts to, with
	// --receiver keysvc (the workflows' webhook is then keysvc's target).
	InboxURL string
	// KeepLogs makes Close keep the logs (in LogDir) instead of removing
	// them with the rest of the lab's files.
	KeepLogs bool

	st     *sandbox.Stack
	keysvc *keysvc.Service
}

// ExecutionsStarted counts the executions n8n has started: the last value
// of the sequence its execution ids come from. Every execution takes an id
// when it starts, whether n8n keeps its data afterwards or not, so the
// difference between two readings is the executions started in between.
func (l *Lab) ExecutionsStarted(ctx context.Context) (int64, error) {
	var n *int64
	if err := l.st.N8NDB.QueryRow(ctx, `SELECT pg_sequence_last_value(pg_get_serial_sequence('execution_entity', 'id')::regclass)`).Scan(&n); err != nil {
		return 0, fmt.Errorf("n8n's executions: %w", err)
	}
	if n == nil {
		return 0, nil // none yet
	}
	return *n, nil
}

// Start starts the lab for the generate options o (the workflows that
// would be generated for them are deployed). It removes what it started
// when it fails.
//
// With the inbox pattern and no outbox URL of the options' own, the outbox
// calls the lab's Recorder; with --receiver keysvc, keysvc's inbox (in this
// process) verifies and saves the deliveries and forwards them to the target
// workflow, as docker-compose's keysvc profile does.
//
// With --hashing node, n8n gets the community node package: nodePackage (a
// packed .tgz), or else the one built from this clone's source.
func Start(ctx context.Context, o generator.Options, nodePackage string, progress io.Writer) (l *Lab, err error) {
	opts := sandbox.Options{Runtime: "local", Why: "the lab runs them"} // keysvc in this process must be reachable from n8n
	if o.Hashing == generator.HashingNode {
		opts.CommunityNode, opts.CommunityNodePackage = true, nodePackage
	}
	l, err = StartEmpty(ctx, opts, progress)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			l.KeepLogs = true // for whoever reads why it failed
			l.Close()
		}
	}()
	if o.Pattern == generator.PatternInbox && o.OutboxURL == "" {
		if l.Outbox, err = StartRecorder(progress); err != nil {
			return l, err
		}
		o.OutboxURL = l.Outbox.URL
	}
	var endpoints []inbox.Endpoint
	if o.Pattern == generator.PatternInbox && o.Receiver == generator.ReceiverKeysvc {
		if endpoints, err = l.inboxEndpoints(o); err != nil {
			return l, err
		}
	}
	if err := l.startKeysvc(ctx, endpoints, o.DBSchema); err != nil {
		return l, err
	}
	if len(endpoints) > 0 {
		l.InboxURL = l.KeysvcURL + "/v1/inbox/" + endpoints[0].Name
	}
	if o.Pattern != generator.PatternInbox && o.KeysvcURL == "" {
		o.KeysvcURL = l.KeysvcURL // the reserve pattern's keysvc mode calls it
	}
	l.Options = o
	files, err := generator.Files(o)
	if err != nil {
		return l, err
	}
	ws, err := deploy.Load(files)
	if err != nil {
		return l, err
	}
	if _, err := l.st.Business.Exec(ctx, string(files["schema.sql"])); err != nil {
		return l, fmt.Errorf("schema: %w", err)
	}
	for _, ref := range deploy.Credentials(ws) {
		if _, err := l.CreateCredential(ctx, ref.Type, ref.Name); err != nil {
			return l, err
		}
	}
	if l.Deployed, err = deploy.Deploy(ctx, l.API, ws, deploy.Options{Progress: progress}); err != nil {
		return l, err
	}
	return l, nil
}

// StartEmpty starts PostgreSQL and n8n as opts says (the PostgreSQL is
// durable; progress goes to progress), creates n8n's owner
// account and an API key, and deploys nothing: `idemhook verify` deploys
// the user's workflow itself.
func StartEmpty(ctx context.Context, opts sandbox.Options, progress io.Writer) (l *Lab, err error) {
	dir, err := os.MkdirTemp("", "idemhook-lab-")
	if err != nil {
		return nil, err
	}
	opts.Durable, opts.Progress = true, progress
	st, err := sandbox.Start(ctx, opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	l = &Lab{st: st, EditorURL: st.N8NURL, WebhookURL: st.WebhookURL, DatabaseURL: st.BusinessDSN, LogDir: st.LogDir, Email: "lab@idemhook.local", Dir: dir}
	defer func() {
		if err != nil {
			l.KeepLogs = true
			l.Close()
		}
	}()
	l.KeysvcToken, l.Password, l.SigningSecret = secret(), "Lab-"+secret()[:16], "whsec_"+secret()
	fmt.Fprintln(progress, "lab: creating n8n's owner account and an API key")
	if l.APIKey, err = n8napi.SetupOwner(ctx, st.N8NURL, l.Email, l.Password); err != nil {
		return l, err
	}
	l.APIKeyFile = filepath.Join(dir, "n8n-api-key")
	if err := os.WriteFile(l.APIKeyFile, []byte(l.APIKey+"\n"), 0o600); err != nil {
		return l, err
	}
	if l.API, err = n8napi.New(st.N8NURL, l.APIKey); err != nil {
		return l, err
	}
	return l, nil
}

// inboxEndpoints is the generated keysvc endpoints file for o with its
// target pointed at this lab's n8n, as keysvc loads it.
func (l *Lab) inboxEndpoints(o generator.Options) ([]inbox.Endpoint, error) {
	files, err := generator.Files(o)
	if err != nil {
		return nil, err
	}
	var f inbox.EndpointsFile
	if err := json.Unmarshal(files[generator.FileEndpoints], &f); err != nil {
		return nil, fmt.Errorf("%s: %w", generator.FileEndpoints, err)
	}
	wfs, err := generator.WorkflowFiles(o)
	if err != nil {
		return nil, err
	}
	for _, w := range wfs {
		if w.WebhookPath != "" {
			for i := range f.Endpoints {
				f.Endpoints[i].Target = l.WebhookURL + "/webhook/" + w.WebhookPath
			}
		}
	}
	raw, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	file := filepath.Join(l.Dir, generator.FileEndpoints)
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		return nil, err
	}
	secrets := map[signature.Provider][]string{}
	if o.Verify != "none" {
		for _, p := range signature.Providers {
			secrets[p] = []string{l.SigningSecret}
		}
	}
	return inbox.LoadEndpoints(file, secrets)
}

// Exec runs sql (a schema file) on the business database.
func (l *Lab) Exec(ctx context.Context, sql string) error {
	_, err := l.st.Business.Exec(ctx, sql)
	return err
}

// CreateCredential creates a credential of type typ named name, filled for
// the lab: the business database for postgres, the signing secret for
// crypto, keysvc's token for httpBearerAuth, keysvc's URL and token for the
// Idempotency Guard's own credential.
func (l *Lab) CreateCredential(ctx context.Context, typ, name string) (n8napi.Credential, error) {
	data, err := l.credentialData(typ)
	if err != nil {
		return n8napi.Credential{}, err
	}
	c, err := l.API.CreateCredential(ctx, name, typ, data)
	if err != nil {
		return c, fmt.Errorf("create credential %q: %w", name, err)
	}
	return c, nil
}

// credentialData fills a credential of type typ for the lab.
func (l *Lab) credentialData(typ string) (map[string]any, error) {
	switch typ {
	case "postgres":
		return l.st.PostgresCredentialData(), nil
	case "crypto":
		return map[string]any{"hmacSecret": l.SigningSecret}, nil
	case "httpBearerAuth":
		return map[string]any{"token": l.KeysvcToken}, nil
	case communitynode.KeysvcCredential:
		return map[string]any{"url": l.KeysvcURL, "token": l.KeysvcToken}, nil
	}
	return nil, fmt.Errorf("the lab cannot fill a credential of type %q", typ)
}

// StartKeysvc serves keysvc on a free loopback port, on the business
// database, with the lab's token (none when KeysvcToken is empty).
func (l *Lab) StartKeysvc(ctx context.Context) error { return l.startKeysvc(ctx, nil, "") }

// startKeysvc is StartKeysvc with keysvc's inbox serving endpoints (none:
// no inbox), its tables in schema.
func (l *Lab) startKeysvc(ctx context.Context, endpoints []inbox.Endpoint, schema string) error {
	// Every provider's signature is checked with the lab's one signing
	// secret (--hashing keysvc and the node on keysvc with --verify).
	secrets := map[signature.Provider][]string{}
	for _, p := range signature.Providers {
		secrets[p] = []string{l.SigningSecret}
	}
	svc, err := keysvc.StartService(ctx, keysvc.ServiceConfig{
		DatabaseURL: l.st.BusinessDSN, PG: keysvc.PGOptions{CreateSchema: true},
		Endpoints: endpoints, Inbox: inbox.Options{Schema: schema, CreateSchema: true},
		Handler: keysvc.Config{Token: l.KeysvcToken, Secrets: secrets}, Addr: "127.0.0.1:0", ReadHeaderTimeout: 10 * time.Second,
	})
	if err != nil {
		return fmt.Errorf("keysvc: %w", err)
	}
	l.keysvc, l.KeysvcURL = svc, svc.URL
	return nil
}

// Close stops the recorder, keysvc, n8n and PostgreSQL; nothing of the lab
// keeps running, and its files go with it: the logs too, unless KeepLogs.
func (l *Lab) Close() error {
	var errs []error
	if l.Outbox != nil {
		errs = append(errs, l.Outbox.Close())
	}
	if l.keysvc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs = append(errs, l.keysvc.Close(ctx))
		cancel()
	}
	if l.KeepLogs {
		errs = append(errs, l.st.Close())
	} else {
		errs = append(errs, l.st.CloseAndRemove())
	}
	errs = append(errs, os.RemoveAll(l.Dir))
	return errors.Join(errs...)
}

func secret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
