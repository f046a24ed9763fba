// Command idemhook generates n8n workflows that make webhook receivers safe
// to retry, and derives idempotency keys from webhook bodies.
//
//	idemhook generate --out DIR [options]   write workflow.json, cleanup-workflow.json,
//	                                        schema.sql, credentials.example.json
//	idemhook key [FILE]                     print the key of a body (stdin without FILE)
//	idemhook schema [options]               print the SQL schema
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr})
	stop()
	os.Exit(code)
}
