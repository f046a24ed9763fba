// Command idemhook generates n8n workflows that make webhook receivers safe
// to retry, and derives idempotency keys from webhook bodies.
//
//	idemhook generate --out DIR [options]   write workflow.json, cleanup-workflow.json,
//	                                        schema.sql, credentials.example.json
//	idemhook key [FILE]                     print the key of a body (stdin without FILE)
//	idemhook schema [options]               print the SQL schema
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
