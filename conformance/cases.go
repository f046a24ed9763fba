package conformance

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// testCase is one hand-written case. want is the event id the spec yields,
// or hashed (the key is the body's SHA-256), or emptyBody.
type testCase struct {
	name, clause, body, want string
}

// presetCase is a case of a provider preset: want is the whole expected key
// (or hashed, or badScope).
type presetCase struct {
	name, preset, scope string
	headers             map[string]string
	body, want          string
}

const (
	hashed    = "\x00hash"
	emptyBody = "\x00empty"
	badScope  = "\x00scope"
)

const bom = "\xEF\xBB\xBF"

func nest(open, close string, n int) string {
	return strings.Repeat(open, n) + strings.Repeat(close, n)
}

var cases = []testCase{
	{"empty body", "empty", "", emptyBody},

	// The id clause, plainly met.
	{"stripe event", "evt", `{"id":"evt_1NqXYZ2eZvKYlo2C","object":"event","type":"payment_intent.succeeded"}`, "evt_1NqXYZ2eZvKYlo2C"},
	{"whitespace around the object", "evt", " \t\r\n{ \"id\" : \"a\" }\r\n\t ", "a"},
	{"id after other members", "evt", `{"type":"x","data":{"id":"inner"},"id":"outer"}`, "outer"},
	{"pretty printed with CRLF", "evt", "{\r\n  \"id\": \"evt_crlf\",\r\n  \"type\": \"t\"\r\n}\r\n", "evt_crlf"},
	{"id spelled with a unicode escape in the member name", "member-name", `{"\u0069d":"escaped-name"}`, "escaped-name"},

	// Only the top-level member "id", case-sensitive, last one wins.
	{"nested id only", "top-level", `{"data":{"object":{"id":"pi_123"}}}`, hashed},
	{"ID upper case", "case-sensitive", `{"ID":"x"}`, hashed},
	{"Id mixed case", "case-sensitive", `{"Id":"x"}`, hashed},
	{"no id member", "top-level", `{"type":"ping"}`, hashed},
	{"empty object", "top-level", `{}`, hashed},
	{"duplicate id, last string wins", "duplicates", `{"id":"first","id":"second"}`, "second"},
	{"duplicate id, last is a number", "duplicates", `{"id":"first","id":2}`, hashed},
	{"duplicate id, first a number, last a string", "duplicates", `{"id":1,"id":"s"}`, "s"},
	{"duplicate id, last is empty", "duplicates", `{"id":"good","id":""}`, hashed},
	{"duplicate id, last is an object", "duplicates", `{"id":"good","id":{"v":"x"}}`, hashed},
	{"member named i\"d", "member-name", `{"i\"d":"x"}`, hashed},

	// Only strings are ids.
	{"id is a small number", "string-only", `{"id":42}`, hashed},
	{"id is above 2^53", "string-only", `{"id":12345678901234567890}`, hashed},
	{"id is null", "string-only", `{"id":null}`, hashed},
	{"id is true", "string-only", `{"id":true}`, hashed},
	{"id is an array", "string-only", `{"id":["a"]}`, hashed},
	{"id is an object", "string-only", `{"id":{"a":"b"}}`, hashed},

	// Length, counted in UTF-8 bytes.
	{"id of one byte", "length", `{"id":"x"}`, "x"},
	{"id empty", "length", `{"id":""}`, hashed},
	{"id of 255 ASCII bytes", "length", `{"id":"` + strings.Repeat("a", 255) + `"}`, strings.Repeat("a", 255)},
	{"id of 256 ASCII bytes", "length", `{"id":"` + strings.Repeat("a", 256) + `"}`, hashed},
	{"id of 85 euro signs (255 bytes)", "length", `{"id":"` + strings.Repeat("€", 85) + `"}`, strings.Repeat("€", 85)},
	{"id of 86 euro signs (258 bytes)", "length", `{"id":"` + strings.Repeat("€", 86) + `"}`, hashed},
	{"id of 127 e-acute and one a (255 bytes)", "length", `{"id":"` + strings.Repeat("é", 127) + `a"}`, strings.Repeat("é", 127) + "a"},
	{"id of 128 e-acute (256 bytes)", "length", `{"id":"` + strings.Repeat("é", 128) + `"}`, hashed},
	{"id of 63 emoji (252 bytes) written as escapes", "length", `{"id":"` + strings.Repeat(`\ud83d\ude00`, 63) + `"}`, strings.Repeat("😀", 63)},
	{"id of 64 emoji (256 bytes)", "length", `{"id":"` + strings.Repeat("😀", 64) + `"}`, hashed},

	// Control characters.
	{"id with escaped NUL", "control", `{"id":"a\u0000b"}`, hashed},
	{"id with escaped U+001F", "control", `{"id":"a\u001fb"}`, hashed},
	{"id with escaped tab", "control", `{"id":"a\tb"}`, hashed},
	{"id with escaped newline", "control", `{"id":"a\nb"}`, hashed},
	{"id with escaped DEL", "control", `{"id":"a\u007fb"}`, hashed},
	{"id with a raw DEL byte", "control", "{\"id\":\"a\x7Fb\"}", hashed},
	{"id with U+0080, not a control for the spec", "control", `{"id":"a\u0080b"}`, "a\u0080b"},
	{"id of one space", "control", `{"id":" "}`, " "},
	{"id with raw U+2028", "control", "{\"id\":\"a\u2028b\"}", "a\u2028b"},
	{"control character elsewhere in the body", "control", `{"x":"\u0000","id":"ok"}`, "ok"},

	// Surrogates.
	{"id with a lone high surrogate", "surrogates", `{"id":"a\ud800b"}`, hashed},
	{"id with a lone low surrogate", "surrogates", `{"id":"a\udc00b"}`, hashed},
	{"id ending in a high surrogate", "surrogates", `{"id":"a\ud800"}`, hashed},
	{"id with a high surrogate before a non-surrogate escape", "surrogates", `{"id":"\ud800\u0041"}`, hashed},
	{"id with surrogates in reverse order", "surrogates", `{"id":"\udc00\ud800"}`, hashed},
	{"id with a surrogate pair escape", "surrogates", `{"id":"smile-\ud83d\ude00"}`, "smile-😀"},
	{"id with upper-case surrogate pair escape", "surrogates", `{"id":"\uD83D\uDE00"}`, "😀"},
	{"lone surrogate elsewhere in the body", "surrogates", `{"id":"fine","x":"\ud800"}`, "fine"},

	// The id is used exactly as decoded.
	{"id with spaces around", "exact", `{"id":"  padded  "}`, "  padded  "},
	{"id composed e-acute", "exact", "{\"id\":\"caf\u00e9\"}", "caf\u00e9"},
	{"id decomposed e-acute", "exact", "{\"id\":\"cafe\u0301\"}", "cafe\u0301"},
	{"id e-acute as escape", "exact", `{"id":"caf\u00E9"}`, "caf\u00e9"},
	{"id with escaped slash", "exact", `{"id":"a\/b"}`, "a/b"},
	{"id with quotes and backslashes", "exact", `{"id":"say \"hi\" \\ \\\\"}`, `say "hi" \ \\`},
	{"id with commas", "exact", `{"id":"a,b,,c"}`, "a,b,,c"},
	{"id with an n8n expression", "exact", `{"id":"{{ $json.body }}={{1+1}}"}`, "{{ $json.body }}={{1+1}}"},
	{"id with SQL placeholders", "exact", `{"id":"$1 $2 ? :name"}`, "$1 $2 ? :name"},
	{"id with SQL injection text", "exact", `{"id":"'; DROP TABLE processed_events; --"}`, "'; DROP TABLE processed_events; --"},
	{"id with emoji", "exact", `{"id":"🦄🚀"}`, "🦄🚀"},
	{"id with right-to-left text", "exact", `{"id":"حدث-١٢٣"}`, "حدث-١٢٣"},
	{"id with U+FFFD", "exact", "{\"id\":\"\uFFFD\"}", "\uFFFD"},
	{"id with a zero-width joiner", "exact", "{\"id\":\"a\u200db\"}", "a\u200db"},

	// BOM.
	{"leading BOM then object", "bom", bom + `{"id":"with-bom"}`, "with-bom"},
	{"leading BOM, whitespace, object", "bom", bom + "\n " + `{"id":"bom-ws"}`, "bom-ws"},
	{"two BOMs", "bom", bom + bom + `{"id":"two-boms"}`, hashed},
	{"BOM after whitespace", "bom", " " + bom + `{"id":"late-bom"}`, hashed},
	{"BOM only", "bom", bom, hashed},
	{"UTF-16LE body with BOM", "utf8", "\xFF\xFE{\x00\"\x00i\x00d\x00\"\x00:\x00\"\x00a\x00\"\x00}\x00", hashed},

	// UTF-8 validity of the whole body.
	{"invalid byte in another member", "utf8", "{\"id\":\"a\",\"x\":\"\xFF\"}", hashed},
	{"Latin-1 e-acute in the id", "utf8", "{\"id\":\"caf\xE9\"}", hashed},
	{"overlong encoding of slash", "utf8", "{\"id\":\"a\xC0\xAFb\"}", hashed},
	{"UTF-8 encoded surrogate", "utf8", "{\"id\":\"a\xED\xA0\x80b\"}", hashed},
	{"truncated multi-byte sequence at the end", "utf8", "{\"id\":\"a\"}\xE2\x82", hashed},

	// Exactly one JSON value, and it is an object.
	{"array holding an object", "object", `[{"id":"a"}]`, hashed},
	{"string", "object", `"evt_1"`, hashed},
	{"number", "object", `42`, hashed},
	{"null", "object", `null`, hashed},
	{"two objects", "one-value", `{"id":"a"}{"id":"b"}`, hashed},
	{"trailing text", "one-value", `{"id":"a"} x`, hashed},
	{"trailing NUL", "one-value", "{\"id\":\"a\"}\x00", hashed},

	// RFC 8259 grammar.
	{"trailing comma", "grammar", `{"id":"a",}`, hashed},
	{"block comment", "grammar", `{"id":"a"/* c */}`, hashed},
	{"line comment before", "grammar", "// c\n{\"id\":\"a\"}", hashed},
	{"NaN", "grammar", `{"id":"a","n":NaN}`, hashed},
	{"Infinity", "grammar", `{"id":"a","n":Infinity}`, hashed},
	{"single quotes", "grammar", `{'id':'a'}`, hashed},
	{"unquoted member name", "grammar", `{id:"a"}`, hashed},
	{"leading zero", "grammar", `{"id":"a","n":01}`, hashed},
	{"fraction without digits", "grammar", `{"id":"a","n":1.}`, hashed},
	{"fraction without integer", "grammar", `{"id":"a","n":.5}`, hashed},
	{"plus sign", "grammar", `{"id":"a","n":+1}`, hashed},
	{"hex number", "grammar", `{"id":"a","n":0x10}`, hashed},
	{"exponent without digits", "grammar", `{"id":"a","n":1e}`, hashed},
	{"invalid escape elsewhere", "grammar", `{"id":"a","x":"\x41"}`, hashed},
	{"short unicode escape elsewhere", "grammar", `{"id":"a","x":"\u12"}`, hashed},
	{"raw tab inside a string", "grammar", "{\"id\":\"a\tb\"}", hashed},
	{"raw newline inside another string", "grammar", "{\"id\":\"a\",\"x\":\"1\n2\"}", hashed},
	{"unterminated string", "grammar", `{"id":"a`, hashed},
	{"missing closing brace", "grammar", `{"id":"a"`, hashed},
	{"missing colon", "grammar", `{"id" "a"}`, hashed},
	{"upper-case literal", "grammar", `{"id":"a","ok":TRUE}`, hashed},
	{"truncated literal", "grammar", `{"id":"a","v":nul}`, hashed},
	{"form feed as whitespace", "grammar", "\f{\"id\":\"a\"}", hashed},
	{"no-break space as whitespace", "grammar", "\u00a0{\"id\":\"a\"}", hashed},
	{"valid number forms", "grammar", `{"n":[-0,0.5e+10,1E5,-1.25e-3,0],"id":"numbers"}`, "numbers"},
	{"literals", "grammar", `{"t":true,"f":false,"z":null,"id":"literals"}`, "literals"},

	// Large numbers elsewhere must not break parsing.
	{"1e999 elsewhere", "numbers", `{"id":"big","amount":1e999}`, "big"},
	{"-1E-999 elsewhere", "numbers", `{"id":"tiny","amount":-1E-999}`, "tiny"},
	{"300-digit integer elsewhere", "numbers", `{"id":"long","n":` + strings.Repeat("9", 300) + `}`, "long"},

	// Depth.
	{"depth exactly 1000", "depth", `{"id":"deep","n":` + nest("[", "]", 999) + `}`, "deep"},
	{"depth 1001", "depth", `{"id":"too-deep","n":` + nest("[", "]", 1000) + `}`, hashed},
	{"depth 1001 in objects", "depth", `{"id":"too-deep-obj","n":` + strings.Repeat(`{"a":`, 1000) + "1" + strings.Repeat("}", 1000) + `}`, hashed},

	// Bodies that are not JSON at all.
	{"form-urlencoded", "not-json", `id=evt_1&type=charge.succeeded`, hashed},
	{"plain text", "not-json", "hello, world\n", hashed},
	{"whitespace only", "not-json", "   ", hashed},
	{"one brace", "not-json", "{", hashed},
	{"every byte value", "not-json", allBytes(), hashed},
	{"XML", "not-json", `<event><id>evt_1</id></event>`, hashed},

	// Size.
	{"64 KiB body with the id last", "size", `{"pad":"` + strings.Repeat("x", 65536) + `","id":"after-padding"}`, "after-padding"},
}

const (
	ghDelivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
	swhID      = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"
	shopifyID  = "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"
	slackEvent = `{"token":"XXYYZZ","team_id":"T1DC2JH3J","api_app_id":"AXXXXXXXXX","event":{"type":"app_mention","user":"U061F7AUR","text":"hi","event_id":"EvNested"},"type":"event_callback","event_id":"Ev08MFMKH6","event_time":1531420618}`
)

var presetCases = []presetCase{
	{"stripe preset is the default spec", "stripe", "", nil, `{"id":"evt_1NqXYZ","type":"charge.succeeded"}`, "evt:evt_1NqXYZ"},
	{"stripe preset without id hashes", "stripe", "", nil, `{"object":"event"}`, hashed},
	{"stripe preset refuses a scope", "stripe", "acct_1", nil, `{"id":"evt_1"}`, badScope},

	{"standard webhooks id header", "standardwebhooks", "", map[string]string{"webhook-id": swhID}, `{"type":"invoice.paid","data":{"id":"in_1"}}`, "swh::" + swhID},
	{"standard webhooks with a scope", "standardwebhooks", "billing-prod", map[string]string{"webhook-id": swhID}, `{"type":"invoice.paid"}`, "swh:billing-prod:" + swhID},
	{"svix id header", "standardwebhooks", "", map[string]string{"svix-id": swhID}, `{"type":"invoice.paid"}`, "swh::" + swhID},
	{"webhook-id wins over svix-id", "standardwebhooks", "", map[string]string{"webhook-id": "msg_a", "svix-id": "msg_b"}, `{}`, "swh::msg_a"},
	{"standard webhooks without id header falls back to the body", "standardwebhooks", "", nil, `{"id":"body-id"}`, "evt:body-id"},
	{"standard webhooks id with a control character falls back", "standardwebhooks", "", map[string]string{"webhook-id": "msg\u0001x"}, `{"type":"t"}`, hashed},
	{"standard webhooks id with non-ASCII falls back", "standardwebhooks", "", map[string]string{"webhook-id": "msg_é"}, `{"type":"t"}`, hashed},
	{"standard webhooks id of 256 bytes falls back", "standardwebhooks", "", map[string]string{"webhook-id": strings.Repeat("m", 256)}, `{"type":"t"}`, hashed},

	{"github delivery scoped by hook id", "github", "", map[string]string{"x-github-delivery": ghDelivery, "x-github-hook-id": "292430182"}, `{"action":"opened","number":2}`, "gh:292430182:" + ghDelivery},
	{"github explicit scope wins over hook id", "github", "repo-hooks", map[string]string{"x-github-delivery": ghDelivery, "x-github-hook-id": "292430182"}, `{"action":"opened"}`, "gh:repo-hooks:" + ghDelivery},
	{"github without hook id", "github", "", map[string]string{"x-github-delivery": ghDelivery}, `{"zen":"Keep it logically awesome."}`, "gh::" + ghDelivery},
	{"github hook id unusable as scope is ignored", "github", "", map[string]string{"x-github-delivery": ghDelivery, "x-github-hook-id": "a b"}, `{}`, "gh::" + ghDelivery},
	{"github without delivery falls back to the body", "github", "", map[string]string{"x-github-hook-id": "292430182"}, `{"action":"opened"}`, hashed},

	{"shopify webhook id scoped by shop", "shopify", "", map[string]string{"x-shopify-webhook-id": shopifyID, "x-shopify-shop-domain": "example.myshopify.com"}, `{"id":820982911946154508,"email":"jon@example.com"}`, "shopify:example.myshopify.com:" + shopifyID},
	{"shopify explicit scope", "shopify", "orders-sub", map[string]string{"x-shopify-webhook-id": shopifyID, "x-shopify-shop-domain": "example.myshopify.com"}, `{}`, "shopify:orders-sub:" + shopifyID},
	{"shopify without webhook id falls back (numeric id hashes)", "shopify", "", map[string]string{"x-shopify-shop-domain": "example.myshopify.com"}, `{"id":820982911946154508}`, hashed},

	{"slack event_id", "slack", "", nil, slackEvent, "slack::Ev08MFMKH6"},
	{"slack event_id with a team scope", "slack", "T1DC2JH3J", nil, slackEvent, "slack:T1DC2JH3J:Ev08MFMKH6"},
	{"slack slash command (form body) hashes", "slack", "", nil, "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&command=%2Fweather&text=94070", hashed},
	{"slack event_id only nested hashes", "slack", "", nil, `{"event":{"event_id":"EvInner"}}`, hashed},
	{"slack numeric event_id hashes", "slack", "", nil, `{"event_id":12345}`, hashed},
	{"slack duplicate event_id, last wins", "slack", "", nil, `{"event_id":"EvFirst","event_id":"EvLast"}`, "slack::EvLast"},
	{"slack url_verification has no event_id", "slack", "", nil, `{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`, hashed},

	{"scope with a space is refused", "github", "two words", map[string]string{"x-github-delivery": ghDelivery}, `{}`, badScope},
	{"scope of 65 bytes is refused", "shopify", strings.Repeat("s", 65), map[string]string{"x-shopify-webhook-id": shopifyID}, `{}`, badScope},
}

func allBytes() string {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return string(b)
}

// Generate renders key-vectors.json from the cases.
func Generate() ([]byte, error) {
	f := File{Spec: "idemhook key spec v1, docs/key-spec.md"}
	for _, c := range presetCases {
		v := vector(c.name, "preset:"+c.preset, c.body, c.want, "provider_id")
		v.Preset, v.Scope, v.Headers = c.preset, c.scope, c.headers
		f.Vectors = append(f.Vectors, v)
	}
	for _, c := range cases {
		f.Vectors = append(f.Vectors, vector(c.name, c.clause, c.body, "evt:"+c.want, "event_id"))
	}
	for _, c := range formCases {
		want := c.want
		if want == "" {
			want = formKey(c.fields, c.files)
		}
		v := vector(c.name, "form", c.body, want, "form")
		if c.preset != "" {
			v.Clause = "preset:" + c.preset
		}
		if strings.HasPrefix(want, "gh:") {
			v.Source = "provider_id"
		}
		v.Preset = c.preset
		v.Headers = map[string]string{"content-type": c.contentType}
		for k, h := range c.headers {
			v.Headers[k] = h
		}
		v.Form = n8nForm(c.fields, c.files)
		f.Vectors = append(f.Vectors, v)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// vector renders one case; want is the expected key, or one of the markers
// (hashed, emptyBody, badScope) after a prefix the markers ignore.
func vector(name, clause, body, want, source string) Vector {
	v := Vector{Name: name, Clause: clause, BodyBase64: base64.StdEncoding.EncodeToString([]byte(body)), JSON: isJSONText(body)}
	switch {
	case strings.HasSuffix(want, emptyBody):
		v.Error = "empty_body"
	case strings.HasSuffix(want, badScope):
		v.Error = "invalid_scope"
	case strings.HasSuffix(want, hashed):
		sum := sha256.Sum256([]byte(body))
		v.Key, v.Source = "sha256:"+hex.EncodeToString(sum[:]), "body_sha256"
	default:
		v.Key, v.Source = want, source
		if strings.HasPrefix(want, "evt:") {
			v.Source = "event_id"
		}
	}
	return v
}

// isJSONText reports whether a sender may label body application/json. It
// uses encoding/json, independent of the scanner under test.
func isJSONText(body string) bool {
	body = strings.TrimPrefix(body, bom)
	return body != "" && utf8.ValidString(body) && json.Valid([]byte(body))
}

// formCase is a multipart/form-data delivery ("Multipart forms" in
// docs/key-spec.md): body is sent as is under contentType; fields (in the
// order sent) and files are the form n8n reads from it, written by hand, and
// the expected key is computed from them here, apart from the code under
// test. want overrides that key (a preset's provider id, or emptyBody).
type formCase struct {
	name, contentType, body string
	fields                  [][2]string
	files                   []string
	preset                  string
	headers                 map[string]string
	want                    string
}

const formBoundary = "----idemhookFormBoundary7MA4YWxkTrZu0gW"

// part renders one part of a form under formBoundary.
func part(disposition, contentType, data string) string {
	p := "--" + formBoundary + "\r\nContent-Disposition: form-data; " + disposition + "\r\n"
	if contentType != "" {
		p += "Content-Type: " + contentType + "\r\n"
	}
	return p + "\r\n" + data + "\r\n"
}

func form(parts ...string) string { return strings.Join(parts, "") + "--" + formBoundary + "--\r\n" }

const (
	pngBytes = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
	pdfBytes = "%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
	formType = "multipart/form-data; boundary=" + formBoundary
)

var formCases = []formCase{
	{name: "form with a text field and a file", contentType: formType,
		body:   form(part(`name="order"`, "", "o_1001"), part(`name="scan"; filename="scan.png"`, "image/png", pngBytes)),
		fields: [][2]string{{"order", "o_1001"}}, files: []string{pngBytes}},
	{name: "form with two files and text fields", contentType: formType,
		body: form(part(`name="customer"`, "", "Ann Example"), part(`name="note"`, "", "two files\r\nand a CRLF"),
			part(`name="scan"; filename="scan.png"`, "image/png", pngBytes), part(`name="invoice"; filename="invoice.pdf"`, "application/pdf", pdfBytes)),
		fields: [][2]string{{"customer", "Ann Example"}, {"note", "two files\r\nand a CRLF"}}, files: []string{pngBytes, pdfBytes}},
	{name: "the same form under another boundary", contentType: "multipart/form-data; boundary=XyZ",
		body: "--XyZ\r\nContent-Disposition: form-data; name=\"order\"\r\n\r\no_1001\r\n" +
			"--XyZ\r\nContent-Disposition: form-data; name=\"scan\"; filename=\"scan.png\"\r\nContent-Type: image/png\r\n\r\n" + pngBytes + "\r\n--XyZ--\r\n",
		fields: [][2]string{{"order", "o_1001"}}, files: []string{pngBytes}},
	{name: "the same files in the other order", contentType: formType,
		body: form(part(`name="invoice"; filename="invoice.pdf"`, "application/pdf", pdfBytes), part(`name="scan"; filename="scan.png"`, "image/png", pngBytes),
			part(`name="note"`, "", "two files\r\nand a CRLF"), part(`name="customer"`, "", "Ann Example")),
		fields: [][2]string{{"customer", "Ann Example"}, {"note", "two files\r\nand a CRLF"}}, files: []string{pngBytes, pdfBytes}},
	{name: "a field sent twice keeps both values in order", contentType: formType,
		body:   form(part(`name="tag"`, "", "b"), part(`name="tag"`, "", "a"), part(`name="id"`, "", "x")),
		fields: [][2]string{{"tag", "b"}, {"tag", "a"}, {"id", "x"}}},
	{name: "a field's values in the other order is another form", contentType: formType,
		body:   form(part(`name="tag"`, "", "a"), part(`name="tag"`, "", "b"), part(`name="id"`, "", "x")),
		fields: [][2]string{{"tag", "a"}, {"tag", "b"}, {"id", "x"}}},
	{name: "a part with a filename and no Content-Type is a field", contentType: formType,
		body:   form(part(`name="upload"; filename="notes.txt"`, "", "plain notes")),
		fields: [][2]string{{"upload", "plain notes"}}},
	{name: "a part with a Content-Type and no filename is a file", contentType: formType,
		body:  form(part(`name="payload"`, "application/json", `{"id":"evt_in_a_part"}`)),
		files: []string{`{"id":"evt_in_a_part"}`}},
	{name: "an empty file input is left out", contentType: formType,
		body:   form(part(`name="email"`, "", "ann@example.com"), part(`name="attachment"; filename=""`, "application/octet-stream", "")),
		fields: [][2]string{{"email", "ann@example.com"}}},
	{name: "an empty file with a name is kept", contentType: formType,
		body:   form(part(`name="email"`, "", "ann@example.com"), part(`name="attachment"; filename="empty.txt"`, "text/plain", "")),
		fields: [][2]string{{"email", "ann@example.com"}}, files: []string{""}},
	{name: "only an empty file input has no key", contentType: formType,
		body: form(part(`name="attachment"; filename=""`, "application/octet-stream", "")), want: emptyBody},
	{name: "field names sort by their UTF-8 bytes", contentType: formType,
		body: form(part(`name="😀"`, "", "emoji"), part(`name="ｚ"`, "", "fullwidth z"), part(`name="Z"`, "", "upper"),
			part(`name="z"`, "", "lower"), part(`name="é"`, "", "e acute")),
		fields: [][2]string{{"😀", "emoji"}, {"ｚ", "fullwidth z"}, {"Z", "upper"}, {"z", "lower"}, {"é", "e acute"}}},
	{name: "an empty field value counts", contentType: formType,
		body: form(part(`name="a"`, "", "")), fields: [][2]string{{"a", ""}}},
	{name: "a quoted boundary, a preamble and an epilogue", contentType: `multipart/form-data; boundary="` + formBoundary + `"`,
		body:   "This is the preamble.\r\n" + form(part(`name="order"`, "", "o_1001"), part(`name="scan"; filename="scan.png"`, "image/png", pngBytes)) + "epilogue\r\n",
		fields: [][2]string{{"order", "o_1001"}}, files: []string{pngBytes}},
	{name: "the media type in upper case", contentType: "Multipart/Form-Data; boundary=" + formBoundary,
		body:   form(part(`name="order"`, "", "o_1001"), part(`name="scan"; filename="scan.png"`, "image/png", pngBytes)),
		fields: [][2]string{{"order", "o_1001"}}, files: []string{pngBytes}},
	{name: "a base64 transfer-encoded file is its decoded bytes", contentType: formType,
		body: form(part(`name="order"`, "", "o_1001"),
			"--"+formBoundary+"\r\nContent-Disposition: form-data; name=\"scan\"; filename=\"scan.png\"\r\nContent-Type: image/png\r\nContent-Transfer-Encoding: base64\r\n\r\n"+
				base64.StdEncoding.EncodeToString([]byte(pngBytes))+"\r\n"),
		fields: [][2]string{{"order", "o_1001"}}, files: []string{pngBytes}},
	{name: "a JSON id in a form field is not an event id", contentType: formType,
		body: form(part(`name="id"`, "", "evt_form_field")), fields: [][2]string{{"id", "evt_form_field"}}},
	{name: "slack preset on a form falls back to the form", contentType: formType, preset: "slack",
		body: form(part(`name="payload"`, "", `{"type":"block_actions"}`)), fields: [][2]string{{"payload", `{"type":"block_actions"}`}}},
	{name: "github preset on a form takes the delivery header", contentType: formType, preset: "github",
		headers: map[string]string{"x-github-delivery": ghDelivery},
		body:    form(part(`name="payload"`, "", `{"action":"opened"}`)), want: "gh::" + ghDelivery},
}

// formKey is the key of a form by the spec's digest text, written here
// apart from package eventkey.
func formKey(fields [][2]string, files []string) string {
	byName := map[string][]string{}
	var names []string
	for _, f := range fields {
		if _, seen := byName[f[0]]; !seen {
			names = append(names, f[0])
		}
		byName[f[0]] = append(byName[f[0]], f[1])
	}
	sort.Strings(names)
	text := "idemhook form v1\n"
	for _, n := range names {
		text += fmt.Sprintf("field %d %s\n", len(n), n)
		for _, v := range byName[n] {
			text += fmt.Sprintf("value %d %s\n", len(v), v)
		}
	}
	var sums []string
	for _, f := range files {
		s := sha256.Sum256([]byte(f))
		sums = append(sums, hex.EncodeToString(s[:]))
	}
	sort.Strings(sums)
	for _, s := range sums {
		text += "file " + s + "\n"
	}
	s := sha256.Sum256([]byte(text))
	return "form:" + hex.EncodeToString(s[:])
}

// n8nForm is the form as n8n hands it to the Code node: a field sent once
// is a string, one sent more than once the list of its values; each file's
// bytes in base64.
func n8nForm(fields [][2]string, files []string) *Form {
	f := &Form{Fields: map[string]any{}}
	for _, kv := range fields {
		switch v := f.Fields[kv[0]].(type) {
		case nil:
			f.Fields[kv[0]] = kv[1]
		case string:
			f.Fields[kv[0]] = []string{v, kv[1]}
		case []string:
			f.Fields[kv[0]] = append(v, kv[1])
		}
	}
	for _, b := range files {
		f.Files = append(f.Files, base64.StdEncoding.EncodeToString([]byte(b)))
	}
	return f
}
