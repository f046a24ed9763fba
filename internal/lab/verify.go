package lab

import (
	"context"
	"fmt"
	"io"

	"github.com/idemhook/idemhook/internal/n8napi"
	"github.com/idemhook/idemhook/internal/sandbox"
	"github.com/idemhook/idemhook/internal/verify"
)

// SQLFile is SQL to apply, named for the message when it fails.
type SQLFile struct {
	Name, SQL string
}

// SchemaError is SQL of the user's (a --schema file, or the events table's
// schema for their workflow) that PostgreSQL refused.
type SchemaError struct {
	Name string
	Err  error
}

func (e *SchemaError) Error() string { return fmt.Sprintf("%s: %v", e.Name, e.Err) }
func (e *SchemaError) Unwrap() error { return e.Err }

// StartVerify starts the scratch lab `idemhook verify` proves a workflow
// in: PostgreSQL and n8n as opts says, the schemas applied in order (a
// *SchemaError when one fails), scratch Postgres and crypto credentials,
// and, for a workflow that reserves through keysvc, a scratch keysvc on
// loopback that takes any token. The target it returns is where
// verify.Run sends its deliveries. On error nothing is left running.
func StartVerify(ctx context.Context, opts sandbox.Options, schemas []SQLFile, keysvc bool, progress io.Writer) (l *Lab, t verify.Target, err error) {
	if l, err = StartEmpty(ctx, opts, progress); err != nil {
		return nil, t, err
	}
	defer func() {
		if err != nil {
			l.Close()
			l = nil
		}
	}()
	for _, s := range schemas {
		if err := l.Exec(ctx, s.SQL); err != nil {
			return l, t, &SchemaError{s.Name, err}
		}
	}
	t = verify.Target{API: l.API, WebhookURL: l.WebhookURL, SigningSecret: l.SigningSecret, Credentials: map[string]n8napi.Credential{}}
	for _, typ := range []string{"postgres", "crypto"} {
		c, err := l.CreateCredential(ctx, typ, "idemhook verify "+typ)
		if err != nil {
			return l, t, err
		}
		t.Credentials[typ] = c
	}
	if !keysvc {
		return l, t, nil
	}
	// Without a token keysvc accepts the workflow's calls with or without
	// its bearer credential.
	l.KeysvcToken = ""
	err = l.StartKeysvc(ctx)
	if err == nil {
		t.KeysvcURL = l.KeysvcURL
		t.Credentials["httpBearerAuth"], err = l.API.CreateCredential(ctx, "idemhook verify keysvc", "httpBearerAuth", map[string]any{"token": "scratch-keysvc-accepts-any"})
	}
	if err != nil {
		return l, t, fmt.Errorf("keysvc: %w", err)
	}
	return l, t, nil
}
