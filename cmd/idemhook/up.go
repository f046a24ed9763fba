package main

import (
	"context"
	"fmt"
	"io"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/lab"
	"github.com/idemhook/idemhook/signature"
)

func runUp(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("up", "idemhook up [options]\n\n"+
		"Starts a local lab: PostgreSQL 16, n8n and keysvc on free local ports, an n8n owner account and API key,\n"+
		"the workflows for the options deployed and live. Prints how to log in and a delivery to try.\n"+
		"Ctrl-C stops everything; nothing keeps running. The first run provisions Node, n8n and PostgreSQL\n"+
		"into the cache (a few minutes).")
	var o generator.Options
	optionFlags(fs, &o)
	keepLogs := fs.Bool("keep-logs", false, "keep n8n's and PostgreSQL's logs after Ctrl-C (they are removed with the rest of the lab)")
	nodePackage := fs.String("node-package", "", "with --hashing node, the community node package to install, a packed `FILE` (.tgz; default: built from this clone's n8n-nodes-idemhook)")
	if err := parse(fs, args, std.out); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if _, err := generator.Files(o); err != nil {
		return asUsage(err)
	}
	if *nodePackage != "" && o.Hashing != generator.HashingNode {
		return usagef("--node-package applies to --hashing node only")
	}
	l, err := lab.Start(ctx, o, *nodePackage, std.err)
	if err != nil {
		return sandboxError(err)
	}
	l.KeepLogs = *keepLogs
	defer func() {
		fmt.Fprintln(std.err, "idemhook up: stopping keysvc, n8n and PostgreSQL")
		if err := l.Close(); err != nil {
			fmt.Fprintf(std.err, "idemhook up: %v\n", err)
		}
		if l.KeepLogs {
			fmt.Fprintf(std.err, "idemhook up: the logs are kept in %s\n", l.LogDir)
		}
	}()
	if err := printLab(std.out, l); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

func printLab(w io.Writer, l *lab.Lab) error {
	fmt.Fprintf(w, "n8n editor:  %s  (log in as %s, password %s)\n", l.EditorURL, l.Email, l.Password)
	fmt.Fprintf(w, "n8n API key: %s  (in %s)\n", l.APIKey, l.APIKeyFile)
	fmt.Fprintf(w, "keysvc:      %s  (Authorization: Bearer %s)\n", l.KeysvcURL, l.KeysvcToken)
	fmt.Fprintf(w, "database:    %s\n", l.DatabaseURL)
	if l.Outbox != nil {
		fmt.Fprintf(w, "outbox API:  %s  (the lab's stand-in for your API: %s shows what the outbox sent)\n", l.Outbox.URL, l.Outbox.Page)
	}
	if l.SigningSecret != "" && l.Options.Verify != "" || l.Options.Pattern == generator.PatternInbox {
		fmt.Fprintf(w, "signing secret of the workflows' signature check: %s\n", l.SigningSecret)
	}
	for _, d := range l.Deployed {
		fmt.Fprintf(w, "workflow:    %-24s %s  %q\n", d.File, d.ID, d.Name)
	}
	for _, d := range l.Deployed {
		if d.URL == "" {
			continue
		}
		if l.InboxURL != "" {
			fmt.Fprintf(w, "target:      %s  (keysvc forwards each saved event here)\n", d.URL)
			d.URL = l.InboxURL
		}
		fmt.Fprintf(w, "webhook:     %s\n\nTry it (run it twice: the second answer is a duplicate):\n", d.URL)
		body := `{"id":"evt_try_1","type":"payment_intent.succeeded"}`
		header := ""
		if l.Options.Pattern == generator.PatternInbox || l.Options.Verify == "stripe" {
			body = `{"id":"evt_try_1","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_try_1","object":"payment_intent","amount":100,"amount_received":100,"currency":"eur","status":"succeeded","metadata":{"order_id":"try-1"}}}}`
			signed, err := signature.ProviderStripe.Sign(signature.Unsigned{Body: []byte(body), Secret: l.SigningSecret})
			if err != nil {
				return err
			}
			header = fmt.Sprintf(" -H 'Stripe-Signature: %s'", signed["Stripe-Signature"])
			if l.Options.Pattern == generator.PatternInbox {
				fmt.Fprintf(w, "  psql '%s' -c \"INSERT INTO %sorders (id, amount, currency) VALUES ('try-1', 100, 'eur')\"\n", l.DatabaseURL, schemaPrefix(l.Options.DBSchema))
			}
			fmt.Fprintln(w, "  (the signature is valid for 5 minutes)")
		}
		fmt.Fprintf(w, "  curl -s -X POST %s -H 'Content-Type: application/json'%s -d '%s'\n", d.URL, header, body)
	}
	// The options the lab filled in are part of what check compares.
	added := ""
	if l.Outbox != nil {
		added += " --outbox-url " + l.Outbox.URL
	}
	if l.Options.Hashing == generator.HashingKeysvc {
		added += " --keysvc-url " + l.Options.KeysvcURL
	}
	fmt.Fprintf(w, "\nidemhook check --n8n-url %s --api-key-file %s [the same options]%s\n", l.EditorURL, l.APIKeyFile, added)
	fmt.Fprintln(w, "Ctrl-C stops the lab.")
	return nil
}

func schemaPrefix(schema string) string {
	if schema == "" {
		return ""
	}
	return schema + "."
}
