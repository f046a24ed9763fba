//go:build !js

package rules

import (
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v4"
)

func parseYAMLTree(name string, data []byte) (*node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		// The line is where the parser found the problem (Mark), not
		// where the construct it was in began (ContextMark, often lines
		// above an indentation mistake).
		var load *yaml.LoadError
		if errors.As(err, &load) {
			reason := "not valid YAML: " + load.Message
			if load.ContextMsg != "" && load.ContextMark.Line > 0 && load.ContextMark.Line != load.Mark.Line {
				reason += fmt.Sprintf(" (%s begun on line %d)", load.ContextMsg, load.ContextMark.Line)
			}
			return nil, &Error{File: name, Line: load.Mark.Line, Reason: reason}
		}
		return nil, &Error{File: name, Reason: "not valid YAML: " + err.Error()}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, &Error{File: name, Line: 1, Reason: "the file is empty"}
	}
	return fromYAML(name, doc.Content[0], 0)
}

func fromYAML(name string, y *yaml.Node, depth int) (*node, error) {
	if depth > 100 {
		return nil, &Error{File: name, Line: y.Line, Reason: "nested more than 100 levels deep"}
	}
	if y.Kind == yaml.AliasNode {
		return fromYAML(name, y.Alias, depth+1)
	}
	n := &node{line: y.Line}
	switch y.Kind {
	case yaml.ScalarNode:
		n.kind, n.value = scalarNode, y.Value
		switch y.ShortTag() {
		case "!!str", "!!binary", "!!timestamp":
			n.tag = "str"
		case "!!int":
			n.tag = "int"
		case "!!float":
			n.tag = "float"
		case "!!bool":
			n.tag = "bool"
			n.value = strings.ToLower(y.Value)
		case "!!null":
			n.tag = "null"
		default:
			return nil, &Error{File: name, Line: y.Line, Reason: "unsupported YAML tag " + y.Tag}
		}
	case yaml.SequenceNode:
		n.kind = seqNode
		for _, c := range y.Content {
			item, err := fromYAML(name, c, depth+1)
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, item)
		}
	case yaml.MappingNode:
		n.kind = mapNode
		for i := 0; i+1 < len(y.Content); i += 2 {
			k := y.Content[i]
			if k.Kind != yaml.ScalarNode {
				return nil, &Error{File: name, Line: k.Line, Reason: "a mapping key must be a plain string"}
			}
			if k.Value == "<<" {
				return nil, &Error{File: name, Line: k.Line, Reason: "YAML merge keys (<<) are not supported: write the keys out"}
			}
			if n.get(k.Value) != nil {
				return nil, &Error{File: name, Line: k.Line, Reason: fmt.Sprintf("key %q appears twice", k.Value)}
			}
			v, err := fromYAML(name, y.Content[i+1], depth+1)
			if err != nil {
				return nil, err
			}
			n.keys, n.keyLines, n.vals = append(n.keys, k.Value), append(n.keyLines, k.Line), append(n.vals, v)
		}
	default:
		return nil, &Error{File: name, Line: y.Line, Reason: "unsupported YAML node"}
	}
	return n, nil
}
