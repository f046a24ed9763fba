package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// node is one value of a rules or sample file with the line it starts on,
// whichever syntax the file was written in: YAML (lines from yaml.Node) or
// JSON (lines counted from the decoder's offset). Every error of Parse
// names a node's line, so both syntaxes report the same positions.
type node struct {
	kind kind
	line int
	// A scalar's text and its type: str, int, float, bool or null.
	value, tag string
	// A mapping's keys (in file order), their lines and values.
	keys     []string
	keyLines []int
	vals     []*node
	// A sequence's items.
	items []*node
}

type kind int

const (
	scalarNode kind = iota
	mapNode
	seqNode
)

func (n *node) describe() string {
	switch n.kind {
	case mapNode:
		return "a mapping"
	case seqNode:
		return "a list"
	}
	switch n.tag {
	case "null":
		return "null"
	case "str":
		return fmt.Sprintf("the string %q", n.value)
	}
	return n.tag + " " + n.value
}

// get returns the value of key in a mapping, or nil.
func (n *node) get(key string) *node {
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

// maxFileSize bounds a rules or sample file.
const maxFileSize = 4 << 20

// parseTree reads data as JSON when its first non-space byte is '{' or '['
// and the name does not end in .yaml/.yml, else as YAML. A syntax error
// names the line.
func parseTree(name string, data []byte) (*node, error) {
	if len(data) > maxFileSize {
		return nil, &Error{File: name, Reason: fmt.Sprintf("the file is larger than %d MiB", maxFileSize>>20)}
	}
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	isYAML := strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")
	if !isYAML && len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		return parseJSONTree(name, data)
	}
	return parseYAMLTree(name, data)
}

// jsonLines turns decoder offsets into line numbers, counting each byte
// once.
type jsonLines struct {
	data []byte
	pos  int
	line int
}

func (l *jsonLines) at(offset int64) int {
	for l.pos < int(offset) && l.pos < len(l.data) {
		if l.data[l.pos] == '\n' {
			l.line++
		}
		l.pos++
	}
	return l.line
}

func parseJSONTree(name string, data []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	lines := &jsonLines{data: data, line: 1}
	n, err := fromJSON(name, dec, lines, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &Error{File: name, Line: lines.at(dec.InputOffset()), Reason: "not valid JSON: more than one value in the file"}
	}
	return n, nil
}

// fromJSON reads one value. The line of a token is the line its last byte
// is on: the decoder's offset after it. A JSON token never spans lines
// (strings hold no raw line break), so that is the line it starts on.
func fromJSON(name string, dec *json.Decoder, lines *jsonLines, depth int) (*node, error) {
	tok, err := dec.Token()
	line := lines.at(dec.InputOffset())
	if err != nil {
		return nil, jsonError(name, dec, lines, err)
	}
	if depth > 100 {
		return nil, &Error{File: name, Line: line, Reason: "nested more than 100 levels deep"}
	}
	return jsonValue(name, dec, lines, tok, line, depth)
}

func jsonValue(name string, dec *json.Decoder, lines *jsonLines, tok json.Token, line, depth int) (*node, error) {
	n := &node{line: line, kind: scalarNode}
	switch v := tok.(type) {
	case string:
		n.value, n.tag = v, "str"
	case json.Number:
		n.value, n.tag = v.String(), "int"
		if strings.ContainsAny(n.value, ".eE") {
			n.tag = "float"
		}
	case bool:
		n.value, n.tag = fmt.Sprint(v), "bool"
	case nil:
		n.value, n.tag = "", "null"
	case json.Delim:
		switch v {
		case '[':
			n.kind = seqNode
			for dec.More() {
				item, err := fromJSON(name, dec, lines, depth+1)
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, item)
			}
		case '{':
			n.kind = mapNode
			for dec.More() {
				tok, err := dec.Token()
				keyLine := lines.at(dec.InputOffset())
				if err != nil {
					return nil, jsonError(name, dec, lines, err)
				}
				key := tok.(string) // the decoder only gives string keys
				if n.get(key) != nil {
					return nil, &Error{File: name, Line: keyLine, Reason: fmt.Sprintf("key %q appears twice", key)}
				}
				v, err := fromJSON(name, dec, lines, depth+1)
				if err != nil {
					return nil, err
				}
				n.keys, n.keyLines, n.vals = append(n.keys, key), append(n.keyLines, keyLine), append(n.vals, v)
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, jsonError(name, dec, lines, err)
		}
	}
	return n, nil
}

func jsonError(name string, dec *json.Decoder, lines *jsonLines, err error) error {
	offset := dec.InputOffset()
	var se *json.SyntaxError
	if errors.As(err, &se) {
		offset = se.Offset
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &Error{File: name, Line: lines.at(int64(len(lines.data))), Reason: "not valid JSON: the file ends too early"}
	}
	return &Error{File: name, Line: lines.at(offset), Reason: "not valid JSON: " + err.Error()}
}

// toValue turns a node into plain Go values (map[string]any, []any,
// string, json.Number, bool, nil), for event bodies and rows in sample
// files and for the JSON Schema check.
func (n *node) toValue() any {
	switch n.kind {
	case mapNode:
		m := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			m[k] = n.vals[i].toValue()
		}
		return m
	case seqNode:
		s := make([]any, len(n.items))
		for i, it := range n.items {
			s[i] = it.toValue()
		}
		return s
	}
	switch n.tag {
	case "int", "float":
		return json.Number(yamlNumber(n.value))
	case "bool":
		return n.value == "true"
	case "null":
		return nil
	}
	return n.value
}

// yamlNumber spells a YAML number as JSON does (YAML also allows 0x1F,
// 1_000, .5, +1 and .inf; those that JSON cannot spell stay as they are and
// fail where a JSON number is needed).
func yamlNumber(s string) string {
	s = strings.ReplaceAll(s, "_", "")
	s = strings.TrimPrefix(s, "+")
	if strings.HasPrefix(s, ".") {
		s = "0" + s
	}
	if strings.HasPrefix(s, "-.") {
		s = "-0" + s[1:]
	}
	return s
}
