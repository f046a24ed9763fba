package signature

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Unsigned is a delivery to sign as a provider's sender signs it: the
// deliveries of tests, those verify sends a workflow, and the example a
// lab prints. stripe-go's webhook.UnsignedPayload is its model.
type Unsigned struct {
	Body []byte
	// Secret is the signing secret: Standard Webhooks' whsec_<base64>
	// (signing v1), any other provider's shared secret as it is.
	Secret string
	// PrivateKey signs Standard Webhooks' v1a (ed25519), beside or instead
	// of Secret's v1.
	PrivateKey ed25519.PrivateKey
	// Timestamp is the time signed (Stripe, Standard Webhooks, Slack); the
	// zero time is now.
	Timestamp time.Time
	// ID is Standard Webhooks' message id (webhook-id), which it signs.
	ID string
}

// Sign returns the headers p's sender puts on u.Body, by canonical name:
// the signature, and the timestamp and id its scheme signs. Verify accepts
// them with u.Secret (or the whpk_ key of u.PrivateKey) within the
// tolerance of u.Timestamp. It fails with ErrNoSecret when neither secret
// nor key is given, ErrInvalidSecret for a Standard Webhooks secret that is
// not whsec_<base64>, and ErrMissingHeader for Standard Webhooks without an
// ID.
func (p Provider) Sign(u Unsigned) (map[string]string, error) {
	if u.Secret == "" && (p != ProviderStandardWebhooks || u.PrivateKey == nil) {
		return nil, ErrNoSecret
	}
	at := u.Timestamp
	if at.IsZero() {
		at = time.Now()
	}
	s, err := schemeOf(p)
	if err != nil {
		return nil, err
	}
	return s.sign(u, strconv.FormatInt(at.Unix(), 10))
}

// signStandardWebhooks signs "id.timestamp.body": v1 with the whsec_
// secret's bytes, v1a with the ed25519 key; both when both are given.
func signStandardWebhooks(u Unsigned, ts string) (map[string]string, error) {
	if u.ID == "" {
		return nil, fmt.Errorf("%w: webhook-id (Unsigned.ID), which Standard Webhooks signs", ErrMissingHeader)
	}
	content := append([]byte(u.ID+"."+ts+"."), u.Body...)
	var sigs []string
	if u.Secret != "" {
		keys, err := standardWebhooksKeys([]string{u.Secret})
		if err != nil || len(keys.secrets) != 1 {
			return nil, fmt.Errorf("%w: sign with a whsec_<base64> secret (or PrivateKey)", ErrInvalidSecret)
		}
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(mac(keys.secrets[0], content)))
	}
	if u.PrivateKey != nil {
		sigs = append(sigs, "v1a,"+base64.StdEncoding.EncodeToString(ed25519.Sign(u.PrivateKey, content)))
	}
	return map[string]string{"Webhook-Id": u.ID, "Webhook-Timestamp": ts, "Webhook-Signature": strings.Join(sigs, " ")}, nil
}
