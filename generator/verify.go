package generator

import (
	"github.com/idemhook/idemhook/signature"
	"github.com/idemhook/idemhook/templates"
)

// Node names of the signature check.
const (
	NodePrepareSignature = "Prepare Signature Check"
	NodeComputeSignature = "Compute Signature"
	NodeCheckSignature   = "Check Signature"
	NodeSignatureValid   = "Signature Valid?"
	NodeRespond401       = "Respond 401 invalid signature"
)

// addVerifyNodes checks the provider's signature before anything else: a
// forged request never reaches the key step, so it cannot reserve a real
// event id. The HMAC is computed by n8n's Crypto node with the secret of an
// encrypted Crypto credential; the Code nodes on either side see the raw
// body and the headers, never the secret. It returns the node that passes
// verified requests on.
func addVerifyNodes(g *graph, r resolved) (string, error) {
	prepare, err := templates.SignaturePrepareScript(r.Verify, int(r.Tolerance.Seconds()))
	if err != nil {
		return "", err
	}
	g.add(node{Name: NodePrepareSignature, Type: typeCode, Position: [2]int{220, 300}, Parameters: map[string]any{
		"mode": "runOnceForAllItems", "language": "javaScript", "jsCode": prepare,
	}})
	encoding := "hex"
	if r.Verify == string(signature.ProviderShopify) {
		encoding = "base64"
	}
	g.add(node{Name: NodeComputeSignature, Type: typeCrypto, Position: [2]int{440, 300},
		Credentials: map[string]credentialRef{"crypto": {Name: r.VerifyCredential}},
		Parameters: map[string]any{
			"action":           "hmac",
			"type":             "SHA256",
			"value":            "={{ $json.signatureCheck.payload }}",
			"dataPropertyName": "expectedSignature",
			"encoding":         encoding,
		}})
	g.add(node{Name: NodeCheckSignature, Type: typeCode, Position: [2]int{660, 300}, Parameters: map[string]any{
		"mode": "runOnceForAllItems", "language": "javaScript", "jsCode": templates.SignatureCheckScript,
	}})
	g.add(ifNode(g, NodeSignatureValid, [2]int{880, 300}, "={{ $json.signature.valid }}",
		opBooleanTrue, ""))
	g.add(respondNode(NodeRespond401, [2]int{1100, 560}, 401,
		"={{ JSON.stringify({ status: 'rejected', code: $json.signature.code, error: $json.signature.reason }) }}"))
	g.connect(NodeWebhook, 0, NodePrepareSignature)
	g.connect(NodePrepareSignature, 0, NodeComputeSignature)
	g.connect(NodeComputeSignature, 0, NodeCheckSignature)
	g.connect(NodeCheckSignature, 0, NodeSignatureValid)
	g.connect(NodeSignatureValid, 1, NodeRespond401)
	g.offset = 880
	return NodeSignatureValid, nil
}
