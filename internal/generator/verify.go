package generator

import (
	"github.com/idemhook/idemhook/signature/provider"
	"github.com/idemhook/idemhook/templates"
)

// Node names of the signature check.
const (
	NodePrepareSignature = "Prepare Signature Check"
	NodeComputeSignature = "Compute Signature"
	NodeSignatureValid   = "Signature Valid?"
	NodeRespond401       = "Respond 401 invalid signature"
	// NodeSlackEvent lets every delivery but Slack's URL check go on; the
	// check is answered its challenge by NodeRespondChallenge.
	NodeSlackEvent       = "Slack Event?"
	NodeRespondChallenge = "Respond Slack challenge"
)

// slackURLCheck is true of a delivery that is Slack's Events API URL check
// ({"type":"url_verification","challenge":…}), in a JavaScript expression
// over body b (the Webhook's parsed body).
const slackURLCheck = "b !== null && typeof b === 'object' && b.type === 'url_verification' && typeof b.challenge === 'string'"

// checksSlackURL reports whether r's deliveries may be Slack's (its
// signature, or its key preset): Slack checks an Events API Request URL by
// sending it {"type":"url_verification","challenge":…}, signed like any
// request, and accepts the URL only when the answer echoes the challenge.
func (r *resolved) checksSlackURL() bool { return r.Verify == "slack" || r.Preset == "slack" }

// addSlackURLCheck answers Slack's URL check after from (the signature
// check, or the Webhook) with its challenge, reserving nothing and running
// nothing; every other delivery goes on from the returned node's first
// output.
func addSlackURLCheck(g *graph, answer answerer, from string) string {
	body := "$('" + NodeWebhook + "').item.json.body"
	g.add(ifNode(g, NodeSlackEvent, g.at(1, 0), "={{ (() => { const b = "+body+"; return !("+slackURLCheck+"); })() }}", opBooleanTrue, ""))
	g.connect(from, 0, NodeSlackEvent)
	g.connect(NodeSlackEvent, 1, g.addNode(answer(NodeRespondChallenge, g.at(2, 3), 200, "={{ JSON.stringify({ challenge: "+body+".challenge }) }}")))
	g.col++
	return NodeSlackEvent
}

// addVerifyNodes checks the provider's signature before anything else: a
// forged request never reaches the key step, so it cannot reserve a real
// event id. The HMAC is computed by n8n's Crypto node with the secret of an
// encrypted Crypto credential; the Code node before it sees the raw body and
// the headers, never the secret, and an expression in the If node after it
// compares the signatures (templates.SignatureValidExpression). It returns
// the node that passes verified requests on: the Webhook itself when r
// verifies nothing.
func addVerifyNodes(g *graph, r resolved) (string, error) {
	return addVerifyNodesAnswering(g, r, respondNode)
}

// addVerifyNodesAnswering is addVerifyNodes with the 401 given by answer.
func addVerifyNodesAnswering(g *graph, r resolved, answer answerer) (string, error) {
	if r.Verify == "" {
		if r.checksSlackURL() {
			return addSlackURLCheck(g, answer, NodeWebhook), nil
		}
		return NodeWebhook, nil
	}
	prepare, err := templates.SignaturePrepareScript(r.Verify, int(r.Tolerance.Seconds()))
	if err != nil {
		return "", err
	}
	g.add(node{Name: NodePrepareSignature, Type: typeCode, Position: g.at(1, 0), Parameters: map[string]any{
		"mode": "runOnceForAllItems", "language": "javaScript", "jsCode": prepare,
	}})
	g.connect(NodeWebhook, 0, NodePrepareSignature)
	g.col++
	verified := addSignatureComparison(g, r, NodePrepareSignature, answer)
	if r.checksSlackURL() {
		return addSlackURLCheck(g, answer, verified), nil
	}
	return verified, nil
}

// addSignatureComparison adds the check's last two steps after prepared, the
// node whose items carry $json.signatureCheck: n8n's Crypto node computes
// the HMAC, the If node compares it. It returns the If node, whose first
// output passes verified requests on.
func addSignatureComparison(g *graph, r resolved, prepared string, answer answerer) string {
	p, _ := provider.Lookup(r.Verify) // Validate parsed it
	g.add(node{Name: NodeComputeSignature, Type: typeCrypto, Position: g.at(1, 0),
		Credentials: map[string]credentialRef{"crypto": {Name: r.VerifyCredential}},
		Parameters: map[string]any{
			"action":           "hmac",
			"type":             "SHA256",
			"value":            "={{ $json.signatureCheck.payload }}",
			"dataPropertyName": "expectedSignature",
			"encoding":         p.WorkflowHMAC,
		}})
	g.add(ifNode(g, NodeSignatureValid, g.at(2, 0), "={{ "+templates.SignatureValidExpression+" }}",
		opBooleanTrue, ""))
	rejected := g.addNode(answer(NodeRespond401, g.at(3, 2), 401, "={{ "+templates.SignatureRejectionExpression+" }}"))
	g.connect(prepared, 0, NodeComputeSignature)
	g.connect(NodeComputeSignature, 0, NodeSignatureValid)
	g.connect(NodeSignatureValid, 1, rejected)
	g.col += 2
	return NodeSignatureValid
}
