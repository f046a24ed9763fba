// Package templates holds what users copy: the n8n Code node script that
// builds the idempotency key, and (in workflows/) the generator's output for
// each mode, kept in sync by the generator's golden test.
package templates

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// CodeNodeScript is the JavaScript of the "Build Idempotency Key" Code node
// for the default spec, embedded as is into generated workflows: the Code
// node's own part (code-node/idempotency-key.js) with the key spec's
// functions (KeySpecScript) where it marks their place.
var CodeNodeScript = mustInsert(codeNodeScript, keySpecMarker, KeySpecScript)

// KeySpecScript is the key spec's functions in JavaScript
// (code-node/key-spec.js): the one source of the key code that the Code node
// and the n8n community nodes (package communitynode generates their copy)
// both run. It needs a crypto binding (require('crypto')) in scope.
//
//go:embed code-node/key-spec.js
var KeySpecScript string

//go:embed code-node/idempotency-key.js
var codeNodeScript string

// keySpecMarker is the line of code-node/idempotency-key.js that
// KeySpecScript replaces.
const keySpecMarker = "// @key-spec: templates/code-node/key-spec.js, the key spec's functions, goes here.\n"

func mustInsert(script, marker, part string) string {
	if strings.Count(script, marker) != 1 {
		panic("templates: the Code node script must mark the key spec's place exactly once")
	}
	return strings.Replace(script, marker, part, 1)
}

// CryptoIDExpression is the crypto-node mode's event id: that mode cannot
// read the raw bytes as text, so this n8n expression takes the id from the
// Webhook node's parsed body ($json.body, filled for application/json) and
// applies the key spec's id clauses to it: a string of 1-255 UTF-8 bytes with
// no control character and no unpaired surrogate. It gives null when the body
// has no usable id. The Node harness runs it against the shared vectors.
var CryptoIDExpression = strings.TrimSuffix(cryptoIDExpression, "\n")

//go:embed expressions/crypto-id.js
var cryptoIDExpression string

// SignatureValidExpression is the last step of a signature check in a
// workflow, an n8n expression for the "Signature Valid?" If node: true when
// the request's signature check was prepared without a fault
// ($json.signatureCheck, from SignaturePrepareScript) and one of the
// signatures it carries equals the HMAC n8n's Crypto node computed
// ($json.expectedSignature). Each candidate of the right length is compared
// in full, character by character, and every candidate is compared, so the
// time taken does not tell how much of a forged signature was right. An
// expression runs in n8n's own process, where a Code node would cost a trip
// to the task runner on every delivery.
var SignatureValidExpression = strings.TrimSuffix(signatureValidExpression, "\n")

//go:embed expressions/signature-valid.js
var signatureValidExpression string

// SignatureRejectionExpression is the n8n expression for the body of the
// 401 a failed signature check answers: the prepared check's own fault (a
// header missing or malformed, a stale timestamp), else no match.
var SignatureRejectionExpression = strings.TrimSuffix(signatureRejectionExpression, "\n")

//go:embed expressions/signature-rejection.js
var signatureRejectionExpression string

//go:embed code-node/signature-prepare.js
var signaturePrepareScript string

// SignaturePrepareScript returns the first step of a signature check for
// provider (stripe, github, shopify or slack) with the given timestamp
// tolerance in seconds.
func SignaturePrepareScript(provider string, toleranceSeconds int) (string, error) {
	p, _ := json.Marshal(provider)
	return setLines(signaturePrepareScript, map[string]string{
		"const PROVIDER = 'stripe';":     "const PROVIDER = " + string(p) + ";",
		"const TOLERANCE_SECONDS = 300;": fmt.Sprintf("const TOLERANCE_SECONDS = %d;", toleranceSeconds),
	})
}

// setLines replaces each line, which must occur exactly once in script.
func setLines(script string, lines map[string]string) (string, error) {
	for old, repl := range lines {
		if strings.Count(script, old) != 1 {
			return "", fmt.Errorf("templates: a Code node script must contain %q exactly once", old)
		}
		script = strings.Replace(script, old, repl, 1)
	}
	return script, nil
}

// The lines KeyScript rewrites; the script declares each exactly once.
const (
	presetLine = "const PRESET = '';"
	scopeLine  = "const SCOPE = '';"
)

// Receipt configures the key script's receipt mode, for the inbox
// pattern's receiver.
type Receipt struct {
	Preset, Scope string
	// DefaultAccount is the account of a delivery that names none.
	DefaultAccount string
	// Headers are the request headers kept with the receipt.
	Headers []string
	// TypeHeader, else TypePath, is where the event type is; AccountHeader,
	// else AccountPath, the account (rules.Source).
	TypeHeader, AccountHeader string
	TypePath, AccountPath     []string
}

// ReceiptScript returns the key script in receipt mode: it also outputs the
// event type and the account (r.DefaultAccount when the delivery names
// none), the raw body in base64 and the kept headers.
func ReceiptScript(r Receipt) (string, error) {
	script, err := KeyScript(r.Preset, r.Scope)
	if err != nil {
		return "", err
	}
	lit := func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	lower := func(hs ...string) []string {
		out := make([]string, len(hs))
		for i, h := range hs {
			out[i] = strings.ToLower(h)
		}
		return out
	}
	path := func(p []string) []string {
		if p == nil {
			return []string{}
		}
		return p
	}
	return setLines(script, map[string]string{
		"const RECEIPT = false;":             "const RECEIPT = true;",
		"const DEFAULT_ACCOUNT = 'default';": "const DEFAULT_ACCOUNT = " + lit(r.DefaultAccount) + ";",
		"const RECEIPT_HEADERS = [];":        "const RECEIPT_HEADERS = " + lit(lower(r.Headers...)) + ";",
		"const TYPE_HEADER = '';":            "const TYPE_HEADER = " + lit(lower(r.TypeHeader)[0]) + ";",
		"const TYPE_PATH = ['type'];":        "const TYPE_PATH = " + lit(path(r.TypePath)) + ";",
		"const ACCOUNT_HEADER = '';":         "const ACCOUNT_HEADER = " + lit(lower(r.AccountHeader)[0]) + ";",
		"const ACCOUNT_PATH = ['account'];":  "const ACCOUNT_PATH = " + lit(path(r.AccountPath)) + ";",
	})
}

// KeyScript returns CodeNodeScript with its PRESET and SCOPE constants set.
// The values are written as JSON string literals, which JavaScript reads
// back exactly. Validating them is the caller's job (eventkey.ParsePreset,
// eventkey.ValidScope); the script refuses what they refuse all the same.
func KeyScript(preset, scope string) (string, error) {
	if preset == "" && scope == "" {
		return CodeNodeScript, nil // the committed file itself
	}
	p, _ := json.Marshal(preset)
	s, _ := json.Marshal(scope)
	return setLines(CodeNodeScript, map[string]string{
		presetLine: "const PRESET = " + string(p) + ";",
		scopeLine:  "const SCOPE = " + string(s) + ";",
	})
}

// SignedReceiptScript is the inbox receiver's Code node when it verifies
// signatures: the receipt (ReceiptScript) and the first step of the
// signature check (SignaturePrepareScript for provider) over the same items
// in one Code node, so that a delivery makes one trip to n8n's task runner
// instead of two. Each script runs unchanged as a function of its own; the
// receipt's items come out with the check's signatureCheck added. Nothing
// is saved before the If node after the Crypto node has found the
// signature valid.
func SignedReceiptScript(r Receipt, provider string, toleranceSeconds int) (string, error) {
	receipt, err := ReceiptScript(r)
	if err != nil {
		return "", err
	}
	prepare, err := SignaturePrepareScript(provider, toleranceSeconds)
	if err != nil {
		return "", err
	}
	return "// idemhook: the inbox receipt and its signature check's first step, in one Code node\n" +
		"// (one trip to n8n's task runner instead of two). The check's payload goes to\n" +
		"// the Crypto node; the receipt is saved only after \"Signature Valid?\".\n" +
		"// Both steps read the body: each binary is fetched once, as every read is a\n" +
		"// call from the task runner to n8n.\n" +
		"const binaryReads = new Map();\n" +
		"const readOnce = { helpers: { getBinaryDataBuffer: (i, name) => {\n" +
		"  const at = i + '/' + name;\n" +
		"  if (!binaryReads.has(at)) binaryReads.set(at, this.helpers.getBinaryDataBuffer(i, name));\n" +
		"  return binaryReads.get(at);\n" +
		"} } };\n" +
		"const signatureChecks = await (async function () {\n" + prepare + "}).call(readOnce);\n" +
		"const receipts = await (async function () {\n" + receipt + "}).call(readOnce);\n" +
		"return receipts.map((item, i) => ({\n" +
		"  json: Object.assign(item.json, { signatureCheck: signatureChecks[i].json.signatureCheck }),\n" +
		"  pairedItem: item.pairedItem,\n" +
		"}));\n", nil
}

// The lines of code-node/signature-prepare.js around its functions: its two
// constants before them, the loop over n8n's items after.
var (
	signatureConstants = regexp.MustCompile(`(?m)^const PROVIDER = .*;\nconst TOLERANCE_SECONDS = .*;\n`)
	signatureItemsLoop = regexp.MustCompile(`(?m)^const out = \[\];\n`)
)

// SignaturePrepareFunctions returns the functions of the signature check's
// first step (code-node/signature-prepare.js) without its constants and its
// loop over n8n's items: the body of a function of PROVIDER and
// TOLERANCE_SECONDS that defines prepare(headers, buf), for the community
// node, which runs the check as the Code node does.
func SignaturePrepareFunctions() (string, error) {
	head := signatureConstants.FindStringIndex(signaturePrepareScript)
	tail := signatureItemsLoop.FindStringIndex(signaturePrepareScript)
	if head == nil || tail == nil || tail[0] < head[1] || !strings.Contains(signaturePrepareScript[head[1]:tail[0]], "\nfunction prepare(headers, buf) {") {
		return "", errors.New("templates: code-node/signature-prepare.js no longer has its constants, prepare(headers, buf) and the items loop in that order")
	}
	return signaturePrepareScript[head[1]:tail[0]], nil
}
