package eventkey

import (
	"errors"
	"fmt"
)

// Rule names the clause of the spec that produced a key, or why a body was
// hashed instead of keyed by its id. The planner page shows it; the codes are
// stable for automation.
type Rule string

const (
	RuleEventID    Rule = "event_id"    // the body's top-level id
	RuleProviderID Rule = "provider_id" // a preset's provider id (header or body member)
	RuleEmptyBody  Rule = "empty_body"  // no key at all
	RuleForm       Rule = "form"        // a multipart form, by its fields and files

	// The body was hashed because…
	RuleInvalidUTF8   Rule = "invalid_utf8"          // it is not UTF-8
	RuleNotJSON       Rule = "not_json"              // it is not one JSON text
	RuleNotObject     Rule = "not_object"            // it is JSON, but not an object
	RuleTooDeep       Rule = "too_deep"              // it nests deeper than MaxDepth
	RuleNoID          Rule = "no_id"                 // it has no top-level id
	RuleIDNotString   Rule = "id_not_string"         // its id is a number, object, null…
	RuleIDEmpty       Rule = "id_empty"              // its id is ""
	RuleIDTooLong     Rule = "id_too_long"           // its id is over MaxIDBytes
	RuleIDControl     Rule = "id_control_char"       // its id holds a control character
	RuleIDUnpaired    Rule = "id_unpaired_surrogate" // its id escapes half a surrogate pair
	RuleIDNotUsable   Rule = "id_not_usable"         // (a preset's member) not a usable id
	RuleProviderNoID  Rule = "provider_id_missing"   // the preset's id header is absent
	RuleProviderBadID Rule = "provider_id_unusable"  // the preset's id header is not a usable id
)

// Explanation is a key with the rule that produced it and a sentence for
// people. For a hashed body, Key is still the full "sha256:" key.
type Explanation struct {
	Key      Key
	Rule     Rule
	Sentence string
	// Fallback is set when a preset's provider id was not usable: Rule then
	// says why the spec's own clause was used, and Fallback what it found.
	Fallback Rule
}

// Explain derives the key of body as Derive does and says which rule of the
// spec produced it.
func Explain(body []byte) Explanation {
	if len(body) == 0 {
		return Explanation{Rule: RuleEmptyBody, Sentence: ErrEmptyBody.Error()}
	}
	s, rule := scan(body, "id")
	if rule == "" {
		rule = idRule(s)
	}
	if rule == RuleEventID {
		return Explanation{Key: Key{Value: EventIDPrefix + s.id, Source: SourceEventID}, Rule: rule,
			Sentence: fmt.Sprintf("The body is a JSON object with a top-level \"id\" string (%d bytes): the key is evt: followed by it.", len(s.id))}
	}
	return Explanation{Key: Key{Value: HashKey(body), Source: SourceBodySHA256}, Rule: rule,
		Sentence: hashSentence(rule, "id") + " So the key is sha256: followed by the SHA-256 of every byte of the body."}
}

// idRule classifies a found member under the id clause.
func idRule(s scanner) Rule {
	switch {
	case s.idUsable:
		return RuleEventID
	case s.idStart != '"':
		return RuleIDNotString
	case len(s.id) == 0:
		return RuleIDEmpty
	case !s.idPaired:
		return RuleIDUnpaired
	case len(s.id) > MaxIDBytes:
		return RuleIDTooLong
	}
	return RuleIDControl
}

func hashSentence(r Rule, member string) string {
	switch r {
	case RuleInvalidUTF8:
		return "The body is not valid UTF-8, so it cannot be read as JSON."
	case RuleNotJSON:
		return "The body is not one valid JSON text (strict RFC 8259: no comments, no trailing commas, nothing after the value)."
	case RuleNotObject:
		return "The body is JSON, but not an object."
	case RuleTooDeep:
		return fmt.Sprintf("The body nests arrays or objects deeper than %d levels.", MaxDepth)
	case RuleNoID:
		return fmt.Sprintf("The body is a JSON object without a top-level %q member.", member)
	case RuleIDNotString:
		return fmt.Sprintf("The top-level %q is not a string (numbers are never ids: JavaScript loses their precision above 2^53).", member)
	case RuleIDEmpty:
		return fmt.Sprintf("The top-level %q is an empty string.", member)
	case RuleIDTooLong:
		return fmt.Sprintf("The top-level %q is longer than %d bytes.", member, MaxIDBytes)
	case RuleIDControl:
		return fmt.Sprintf("The top-level %q holds a control character.", member)
	case RuleIDUnpaired:
		return fmt.Sprintf("The top-level %q escapes half of a surrogate pair, which no implementation decodes alike.", member)
	}
	return ""
}

// ExplainFor is Explain under preset p, as DeriveFor derives: the provider's
// id when it is usable, else the spec's own clause, and why.
func ExplainFor(p Preset, header Header, body []byte, scope string) (Explanation, error) {
	k, err := DeriveFor(p, header, body, scope)
	if err != nil {
		if errors.Is(err, ErrEmptyBody) {
			return Explanation{Rule: RuleEmptyBody, Sentence: err.Error()}, nil
		}
		return Explanation{}, err
	}
	if k.Source == SourceForm {
		return Explanation{Key: k, Rule: RuleForm, Sentence: "The body is a multipart/form-data form, which n8n parses before any node runs and whose boundary changes with every request: " +
			"the key is form: followed by the SHA-256 of its fields and of its files' bytes."}, nil
	}
	if k.Source == SourceProviderID {
		rule := presetRules[p]
		where := "the top-level \"" + rule.IDMember + "\" of the body"
		if rule.IDMember == "" {
			where = "the " + rule.IDHeaders[0] + " header"
		}
		return Explanation{Key: k, Rule: RuleProviderID,
			Sentence: fmt.Sprintf("The %s preset reads the provider's id from %s: the key is %s:<scope>:<id>.", p, where, rule.Prefix)}, nil
	}
	e := Explain(body)
	rule, ok := presetRules[p]
	if !ok {
		return e, nil
	}
	why := RuleIDNotUsable
	switch {
	case rule.IDMember != "":
		_, r := scan(body, rule.IDMember)
		if r == RuleNoID {
			why = RuleProviderNoID
		}
	default:
		id := ""
		for _, h := range rule.IDHeaders {
			if id = header.Get(h); id != "" {
				break
			}
		}
		why = RuleProviderBadID
		if id == "" {
			why = RuleProviderNoID
		}
	}
	e.Fallback, e.Rule = e.Rule, why
	e.Sentence = fmt.Sprintf("The %s preset found no usable provider id, so the spec's own rule applies: %s", p, e.Sentence)
	return e, nil
}
