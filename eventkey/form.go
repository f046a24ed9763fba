package eventkey

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A multipart/form-data delivery is keyed by its form, not by its bytes
// ("Multipart forms" in docs/key-spec.md): n8n parses such a body before any
// node runs and keeps none of its bytes, and a sender draws a new boundary
// for every request, so a retry's bytes differ from the first attempt's.
// The form is read as n8n 2.41 reads it (formidable 3, then n8n's own
// normalisation): a part with a Content-Type header is a file, any other
// part a field; a file with an empty filename and no bytes (an empty file
// input) is dropped.

// FormPrefix starts the key of a multipart form.
const FormPrefix = "form:"

// SourceForm marks a key built from a multipart form's fields and files.
const SourceForm Source = "form"

// ErrEmptyForm is DeriveFor's answer to a multipart form with no field and
// no file: like an empty body, nothing identifies the event. It is an
// ErrEmptyBody (errors.Is).
var ErrEmptyForm = fmt.Errorf("%w (a multipart form with no field and no file)", ErrEmptyBody)

// Form is a multipart/form-data body as n8n hands it to a workflow: each
// field's values in the order sent, and each file's bytes.
type Form struct {
	Fields map[string][]string
	Files  [][]byte
}

// IsMultipart reports whether a Content-Type header announces a
// multipart/form-data body, compared as n8n compares it: the media type
// before any ';', in lower case.
func IsMultipart(contentType string) bool {
	t, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(t) == "multipart/form-data"
}

// Regular expressions of formidable 3 (plugins/multipart.js and
// Formidable.js), so that a part gets the name and the file-ness n8n gives it.
var (
	formBoundary = regexp.MustCompile(`(?i)boundary=(?:"([^"]+)"|([^;]+))`)
	formName     = regexp.MustCompile(`(?i)\bname=("([^"]*)"|([^()<>@,;:\\"/\[\]?={}\s\t/]+))`)
	formFileName = regexp.MustCompile(`(?i)\bfilename=("(.*?)"|([^()<>{}\[\]@,;:"?=\s/\t]+))($|;\s)`)
)

// ParseForm reads a multipart/form-data body under contentType. ok is false
// when contentType is not multipart/form-data or the body is not a form n8n
// would parse (no boundary, no closing delimiter, a part's transfer encoding
// other than none, binary, 7bit, 8bit or base64): n8n answers such a
// delivery 400 before any node runs.
func ParseForm(contentType string, body []byte) (f Form, ok bool) {
	if !IsMultipart(contentType) {
		return Form{}, false
	}
	m := formBoundary.FindStringSubmatch(contentType)
	if m == nil {
		return Form{}, false
	}
	boundary := m[1] + m[2]
	delim := []byte("--" + boundary)
	start := bytes.Index(body, delim)
	if start < 0 {
		return Form{}, false
	}
	rest := body[start+len(delim):]
	f.Fields = map[string][]string{}
	for {
		if bytes.HasPrefix(rest, []byte("--")) {
			return f, true
		}
		var found bool
		if rest, found = bytes.CutPrefix(rest, []byte("\r\n")); !found {
			return Form{}, false
		}
		head, after, found := bytes.Cut(rest, []byte("\r\n\r\n"))
		if !found {
			return Form{}, false
		}
		data, next, found := bytes.Cut(after, append([]byte("\r\n"), delim...))
		if !found {
			return Form{}, false
		}
		rest = next
		p, ok := readPart(head, data)
		if !ok {
			return Form{}, false
		}
		switch {
		case p.file && p.hasFileName && p.fileName == "" && len(p.data) == 0:
			// an empty file input, which n8n drops
		case p.file:
			f.Files = append(f.Files, p.data)
		default:
			f.Fields[p.name] = append(f.Fields[p.name], string(p.data))
		}
	}
}

type formPart struct {
	name              string
	file, hasFileName bool
	fileName          string
	data              []byte
}

func readPart(head, data []byte) (formPart, bool) {
	// formidable names a part without a name null, which n8n's form object
	// keys "null".
	p := formPart{name: "null"}
	encoding := ""
	for _, line := range strings.Split(string(head), "\r\n") {
		field, value, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		value = strings.TrimLeft(value, " ")
		switch strings.ToLower(field) {
		case "content-disposition":
			if m := formName.FindStringSubmatch(value); m != nil {
				p.name = m[2] + m[3]
			}
			if m := formFileName.FindStringSubmatch(value); m != nil {
				name := m[2] + m[3]
				p.fileName = name[strings.LastIndexByte(name, '\\')+1:]
				p.hasFileName = true
			} else {
				p.fileName, p.hasFileName = "", false
			}
		case "content-type":
			p.file = value != ""
		case "content-transfer-encoding":
			encoding = strings.ToLower(value)
		}
	}
	switch encoding {
	case "", "binary", "7bit", "8bit", "utf-8":
		p.data = data
	case "base64":
		decoded, err := base64.StdEncoding.DecodeString(string(bytes.Join(bytes.Fields(data), nil)))
		if err != nil {
			return p, false
		}
		p.data = decoded
	default:
		return p, false
	}
	return p, true
}

// Key returns the form's key: "form:" followed by the lowercase hex SHA-256
// of its digest text (docs/key-spec.md). It fails with ErrEmptyForm for a
// form with no field and no file.
func (f Form) Key() (Key, error) {
	if len(f.Fields) == 0 && len(f.Files) == 0 {
		return Key{}, ErrEmptyForm
	}
	var b strings.Builder
	b.WriteString("idemhook form v1\n")
	names := make([]string, 0, len(f.Fields))
	for name := range f.Fields {
		names = append(names, name)
	}
	slices.Sort(names) // Go compares strings byte by byte: UTF-8 order
	for _, name := range names {
		writeLenPrefixed(&b, "field", name)
		for _, v := range f.Fields[name] {
			writeLenPrefixed(&b, "value", v)
		}
	}
	sums := make([]string, len(f.Files))
	for i, data := range f.Files {
		s := sha256.Sum256(data)
		sums[i] = hex.EncodeToString(s[:])
	}
	slices.Sort(sums)
	for _, s := range sums {
		b.WriteString("file " + s + "\n")
	}
	sum := sha256.Sum256([]byte(b.String()))
	return Key{Value: FormPrefix + hex.EncodeToString(sum[:]), Source: SourceForm}, nil
}

func writeLenPrefixed(b *strings.Builder, label, s string) {
	b.WriteString(label + " " + strconv.Itoa(len(s)) + " " + s + "\n")
}
