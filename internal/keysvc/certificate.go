package keysvc

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// certRecheck is how often a handshake looks whether the certificate files
// changed: a renewed certificate (certbot, cert-manager, a mounted secret)
// is served within it, without a restart or a signal.
const certRecheck = time.Minute

// certificate is the TLS certificate keysvc serves, read from its files
// again when they change (checked at most every certRecheck, and at once by
// Reload, which SIGHUP calls). A pair that does not load leaves the one
// served before in place, and says so in the log.
type certificate struct {
	certFile, keyFile string
	logger            *slog.Logger

	mu      sync.Mutex
	current *tls.Certificate
	stamp   string    // the files' sizes and modification times at the last load
	checked time.Time // when the files were last looked at
}

// loadCertificate reads the pair once; an error stops keysvc from starting.
func loadCertificate(certFile, keyFile string, logger *slog.Logger) (*certificate, error) {
	c := &certificate{certFile: certFile, keyFile: keyFile, logger: logger}
	if err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

// stampOf is what tells the files changed: their sizes and times.
func (c *certificate) stampOf() (string, error) {
	var stamp string
	for _, f := range []string{c.certFile, c.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		stamp += fmt.Sprintf("%d:%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return stamp, nil
}

// load reads the pair; c.mu is held or c is not yet shared.
func (c *certificate) load() error {
	stamp, err := c.stampOf()
	if err != nil {
		return fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	c.current, c.stamp, c.checked = &pair, stamp, time.Now()
	return nil
}

// Reload reads the files again now, whether or not they changed.
func (c *certificate) Reload() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.load(); err != nil {
		c.logger.Error("TLS certificate not reloaded; the previous one is still served", "error", err)
		return err
	}
	c.logger.Info("TLS certificate reloaded", "file", c.certFile)
	return nil
}

// get is tls.Config.GetCertificate: the current pair, read again first
// when the files changed since the last look, at most every certRecheck.
func (c *certificate) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.checked) >= certRecheck {
		c.checked = time.Now()
		if stamp, err := c.stampOf(); err == nil && stamp != c.stamp {
			if err := c.load(); err != nil {
				c.logger.Error("TLS certificate files changed but do not load; the previous one is still served", "error", err)
			} else {
				c.logger.Info("TLS certificate reloaded: its files changed", "file", c.certFile)
			}
		}
	}
	return c.current, nil
}
