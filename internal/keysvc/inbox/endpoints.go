package inbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/internal/rules"
	"github.com/idemhook/idemhook/signature"
)

// Endpoint is one provider-facing inbox route, POST /v1/inbox/{name}: its
// deliveries are verified, saved and forwarded to Target.
type Endpoint struct {
	// Name is the route's last segment: words of [a-z0-9] joined by one
	// '_' or '-', at most 58 characters (it also names the endpoint's River
	// queue, inbox_<name>).
	Name string `json:"name"`
	// Provider verifies the signature of every delivery (stripe, github, …).
	// Empty: no signature; the route then needs keysvc's bearer token.
	Provider signature.Provider `json:"provider"`
	// Account is the receipt's account when the event names none.
	Account string `json:"account"`
	// Target receives each saved event: POST with the original body.
	Target string `json:"target"`
	// Events is the allowlist: other types are saved as ignored and not
	// forwarded. Empty forwards every type.
	Events []string `json:"events"`
	// TargetTokenEnv or TargetTokenFile hold a bearer token sent to the
	// target (never in this file itself).
	TargetTokenEnv  string `json:"target_token_env"`
	TargetTokenFile string `json:"target_token_file"`
	// SecretEnv or SecretFile hold this endpoint's signing secrets (one per
	// line, for rotations; for standardwebhooks whsec_ secrets or whpk_
	// public keys); default KEYSVC_SECRET_<PROVIDER>. A secret of the wrong
	// form fails LoadEndpoints.
	SecretEnv  string `json:"secret_env"`
	SecretFile string `json:"secret_file"`
	// MaxAttempts bounds the deliveries of one event; it is then failed,
	// visible and replayable. Default 25.
	MaxAttempts int `json:"max_attempts"`
	// Concurrency bounds the deliveries to Target in flight at once, so a
	// backlog (after the target was down) drains without a burst the
	// target cannot take. Default 4.
	Concurrency int `json:"concurrency"`
	// Batch is how many saved events one forward may carry (default 1: one
	// event per forward, as it was received). Above 1, a forward is a JSON
	// {"events": [...]} of up to Batch events that are waiting, each with
	// its inbox_id, receipt key, account, headers and body (base64), and the
	// target answers each (see forwardBatch). Up to Concurrency × Batch
	// events are then in flight, and may be sent again after a crash.
	Batch int `json:"batch"`

	allowed     map[string]bool
	targetToken string
	secrets     []string
}

// DefaultMaxDeliveries is an endpoint's default MaxAttempts.
const DefaultMaxDeliveries = 25

// DefaultConcurrency is an endpoint's default Concurrency: n8n on a small
// machine takes a few executions at once better than twenty (each then takes
// seconds, and a delivery timeout turns into a redelivery).
const DefaultConcurrency = 4

// MaxBatch bounds an endpoint's Batch.
const MaxBatch = 100

// EndpointsFile is the layout of --endpoints FILE.
type EndpointsFile struct {
	Endpoints []Endpoint `json:"endpoints"`
}

// endpointName is River's rule for queue names, which inbox_<name> must
// meet: words of [a-z0-9] joined by one '_' or '-'.
var endpointName = regexp.MustCompile(`^[a-z0-9]+(?:[_-][a-z0-9]+)*$`)

// maxEndpointName leaves room for the queue's "inbox_" within River's 64.
const maxEndpointName = 58

// LoadEndpoints reads and validates an endpoints file. Signing secrets
// default to providerSecrets (KEYSVC_SECRET_<PROVIDER>). Every problem is
// reported with the endpoint it concerns.
func LoadEndpoints(path string, providerSecrets map[signature.Provider][]string) ([]Endpoint, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("endpoints file: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var f EndpointsFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("endpoints file %s: %w", path, err)
	}
	if len(f.Endpoints) == 0 {
		return nil, fmt.Errorf("endpoints file %s: no endpoints", path)
	}
	seen := map[string]bool{}
	for i := range f.Endpoints {
		e := &f.Endpoints[i]
		if err := e.resolve(providerSecrets); err != nil {
			return nil, fmt.Errorf("endpoints file %s: endpoint %d (%q): %w", path, i+1, e.Name, err)
		}
		if seen[e.Name] {
			return nil, fmt.Errorf("endpoints file %s: endpoint %q appears twice", path, e.Name)
		}
		seen[e.Name] = true
	}
	return f.Endpoints, nil
}

// resolve checks e and fills in its defaults, its allowlist, its target
// token and its signing secrets (by default providerSecrets' for its
// provider).
func (e *Endpoint) resolve(providerSecrets map[signature.Provider][]string) error {
	if err := e.resolveRoute(); err != nil {
		return err
	}
	if err := e.resolveLimits(); err != nil {
		return err
	}
	return e.resolveSecrets(providerSecrets)
}

// resolveRoute checks what the endpoint receives and where it forwards it:
// its name, provider, account, target and allowlist.
func (e *Endpoint) resolveRoute() error {
	if len(e.Name) > maxEndpointName || !endpointName.MatchString(e.Name) {
		return fmt.Errorf("name must be words of a-z and 0-9 joined by one '_' or '-' (such as stripe-live), at most %d characters", maxEndpointName)
	}
	if e.Provider != "" {
		p, err := signature.ParseProvider(string(e.Provider))
		if err != nil {
			return err
		}
		e.Provider = p
	}
	if e.Account == "" {
		e.Account = "default"
	}
	if !eventkey.ValidID(e.Account) {
		return errors.New("account must be 1-255 bytes of UTF-8 with no control character")
	}
	u, err := url.Parse(e.Target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("target %q: use an http(s) URL without credentials (put a token in target_token_env or target_token_file)", e.Target)
	}
	e.allowed = map[string]bool{}
	for _, t := range e.Events {
		if t == "" || len(t) > 100 || strings.ContainsAny(t, ", \t\r\n") {
			return fmt.Errorf("event type %q: give the provider's type names, such as payment_intent.succeeded", t)
		}
		e.allowed[t] = true
	}
	return nil
}

// resolveLimits defaults and bounds the endpoint's deliveries: its max
// attempts, concurrency and batch.
func (e *Endpoint) resolveLimits() error {
	if e.MaxAttempts == 0 {
		e.MaxAttempts = DefaultMaxDeliveries
	}
	if e.MaxAttempts < 1 || e.MaxAttempts > 1000 {
		return errors.New("max_attempts must be between 1 and 1000")
	}
	if e.Concurrency == 0 {
		e.Concurrency = DefaultConcurrency
	}
	if e.Concurrency < 1 || e.Concurrency > 100 {
		return errors.New("concurrency must be between 1 and 100")
	}
	if e.Batch == 0 {
		e.Batch = 1
	}
	if e.Batch < 1 || e.Batch > MaxBatch {
		return fmt.Errorf("batch must be between 1 and %d", MaxBatch)
	}
	return nil
}

// resolveSecrets reads the target token and the signing secrets (one per
// line of secret_env or secret_file, else providerSecrets' for the
// provider), and checks a provider has secrets of its form.
func (e *Endpoint) resolveSecrets(providerSecrets map[signature.Provider][]string) error {
	var err error
	if e.targetToken, err = secretValue(e.TargetTokenEnv, e.TargetTokenFile); err != nil {
		return fmt.Errorf("target token: %w", err)
	}
	if e.SecretEnv != "" || e.SecretFile != "" {
		v, err := secretValue(e.SecretEnv, e.SecretFile)
		if err != nil {
			return fmt.Errorf("signing secret: %w", err)
		}
		for _, line := range strings.Split(v, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				e.secrets = append(e.secrets, line)
			}
		}
	} else if e.Provider != "" {
		e.secrets = providerSecrets[e.Provider]
	}
	if e.Provider != "" && len(e.secrets) == 0 {
		return fmt.Errorf("no signing secret for %s: set secret_env or secret_file, or KEYSVC_SECRET_%s", e.Provider, strings.ToUpper(string(e.Provider)))
	}
	if e.Provider != "" {
		if err := e.Provider.CheckSecrets(e.secrets); err != nil {
			return fmt.Errorf("signing secret: %w", err)
		}
	}
	return nil
}

// secretValue reads a secret from the environment variable env or the file,
// whichever is named ("" when neither is).
func secretValue(env, file string) (string, error) {
	switch {
	case env != "" && file != "":
		return "", errors.New("name an environment variable or a file, not both")
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok || strings.TrimSpace(v) == "" {
			return "", fmt.Errorf("environment variable %s is not set", env)
		}
		return strings.TrimSpace(v), nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(string(b)), nil
	}
	return "", nil
}

// queue is the River queue of the endpoint's deliveries: one per endpoint,
// so that each has its own concurrency and a slow target holds no other
// endpoint's deliveries back.
func (e *Endpoint) queue() string { return "inbox_" + e.Name }

// allows reports whether events of type t are forwarded.
func (e *Endpoint) allows(t string) bool { return len(e.allowed) == 0 || e.allowed[t] }

// receiptHeaders are the request headers kept with a receipt and forwarded
// with it: the content type and what the provider's signature and id are
// read from (generator.receiptHeaders keeps the same for the n8n receiver).
func (e *Endpoint) receiptHeaders() []string {
	headers := []string{"Content-Type"}
	if e.Provider != "" {
		headers = append(headers, e.Provider.Headers()...)
	}
	headers = append(headers, eventkey.Preset(e.Provider).Headers()...)
	for _, h := range e.sources().Headers() {
		if !slices.ContainsFunc(headers, func(k string) bool { return strings.EqualFold(k, h) }) {
			headers = append(headers, h)
		}
	}
	return headers
}

// sources is where the endpoint's provider keeps an event's type and
// account (Shopify's topic and shop headers, GitHub's event header and
// installation.id); a provider the rules do not name (slack, or none) is
// read as Stripe is: the body's type and account.
func (e *Endpoint) sources() rules.Provider {
	if p, ok := rules.ProviderFor(string(e.Provider)); ok {
		return p
	}
	p, _ := rules.ProviderFor("stripe")
	return p
}

// Secrets are the endpoint's signing secrets, for keysvc to verify its
// deliveries with (never logged).
func (e *Endpoint) Secrets() []string { return e.secrets }
