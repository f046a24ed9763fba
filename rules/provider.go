package rules

import (
	"slices"
	"strings"
)

// Source is where a provider keeps one property of its events: a path
// into the body, or a request header.
type Source struct {
	Body   Path
	Header string
}

// Provider is what differs between webhook providers for the rules: where
// the event type and the account are, and which signature the receiver
// checks. A rules file names its provider; the rules themselves only read
// the body, so a new provider is an entry here, not a fork of the rules.
type Provider struct {
	Name string
	// Type is where the event type is. The receivers store the body's
	// "type" as inbox_events.event_type; a provider whose type is a header
	// has it read from the stored headers.
	Type Source
	// Account is where the event names its account (Stripe Connect's
	// "account"); events without one get the receiver's --account.
	Account Source
	// Verify is the signature the receiver checks by default
	// (signature.Provider's name).
	Verify string
}

// providers are the known providers. The next ones (Shopify, GitHub,
// Standard Webhooks) read their type from a header.
var providers = []Provider{
	{Name: "stripe", Type: Source{Body: Path{"type"}}, Account: Source{Body: Path{"account"}}, Verify: "stripe"},
}

// ProviderNames lists the providers a rules file may name.
func ProviderNames() []string {
	names := make([]string, len(providers))
	for i, p := range providers {
		names[i] = p.Name
	}
	return names
}

func providerNamed(name string) (Provider, bool) {
	i := slices.IndexFunc(providers, func(p Provider) bool { return p.Name == name })
	if i < 0 {
		return Provider{}, false
	}
	return providers[i], true
}

// StoredType reports whether the provider's type is what the receivers
// store in inbox_events.event_type (the body's top-level "type").
func (p Provider) StoredType() bool {
	return p.Type.Header == "" && len(p.Type.Body) == 1 && p.Type.Body[0] == "type"
}

// headerName is a source's header in lower case, as the receivers keep
// headers.
func (s Source) headerName() string { return strings.ToLower(s.Header) }
