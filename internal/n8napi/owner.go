package n8napi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"time"
)

// SetupOwner creates the owner account of a fresh n8n (one that has never
// been set up), logs in and creates an API key with every scope, through
// the editor's own REST endpoints (/rest: not part of the public API, used
// for labs and tests). It returns the raw API key.
func SetupOwner(ctx context.Context, baseURL, email, password string) (string, error) {
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	call := func(method, path string, body, out any) error {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequestWithContext(ctx, method, baseURL+"/rest"+path, rd)
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("n8n %s /rest%s: %w", method, path, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode != http.StatusOK {
			return &Error{Method: method, Path: "/rest" + path, Status: resp.StatusCode, Message: string(raw[:min(len(raw), 300)])}
		}
		if out != nil {
			return json.Unmarshal(raw, out)
		}
		return nil
	}
	if err := call(http.MethodPost, "/owner/setup", map[string]string{
		"email": email, "firstName": "idemhook", "lastName": "lab", "password": password,
	}, nil); err != nil {
		return "", fmt.Errorf("set up the owner account: %w", err)
	}
	if err := call(http.MethodPost, "/login", map[string]string{"emailOrLdapLoginId": email, "password": password}, nil); err != nil {
		return "", fmt.Errorf("log in: %w", err)
	}
	var scopes struct {
		Data []string `json:"data"`
	}
	if err := call(http.MethodGet, "/api-keys/scopes", nil, &scopes); err != nil {
		return "", err
	}
	var key struct {
		Data struct {
			RawAPIKey string `json:"rawApiKey"`
		} `json:"data"`
	}
	if err := call(http.MethodPost, "/api-keys", map[string]any{"label": "idemhook", "expiresAt": nil, "scopes": scopes.Data}, &key); err != nil {
		return "", fmt.Errorf("create an API key: %w", err)
	}
	if key.Data.RawAPIKey == "" {
		return "", fmt.Errorf("n8n created an API key but did not return it")
	}
	return key.Data.RawAPIKey, nil
}
