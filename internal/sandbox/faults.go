package sandbox

// Faults the crash tests inject: processes killed, PostgreSQL restarted.

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// RestartPostgres stops PostgreSQL immediately, as `pg_ctl stop -m
// immediate` or a crash would, and starts it again on the same data; every
// client's connections are cut.
func (s *Stack) RestartPostgres(ctx context.Context) error {
	if err := s.StopPostgres(ctx); err != nil {
		return err
	}
	return s.StartPostgres(ctx)
}

// StopPostgres stops PostgreSQL immediately and leaves it stopped, as an
// outage would: every connection is refused until StartPostgres starts it
// again on the same data.
func (s *Stack) StopPostgres(ctx context.Context) error  { return s.rt.stopPostgres(ctx) }
func (s *Stack) StartPostgres(ctx context.Context) error { return s.rt.resumePostgres(ctx) }

// KillWorker kills queue worker i (1-based) with SIGKILL; StartWorker
// starts it again.
func (s *Stack) KillWorker(ctx context.Context, i int) error  { return s.rt.killWorker(ctx, i) }
func (s *Stack) StartWorker(ctx context.Context, i int) error { return s.rt.startWorker(ctx, i) }

// KillN8N kills n8n with SIGKILL, as a crash or an OOM kill would: the
// executions in flight die with it.
func (s *Stack) KillN8N(ctx context.Context) error { return s.rt.killN8N(ctx) }

// StartN8N starts n8n again after KillN8N and waits until it is ready and
// has activated its published workflows again (webhookPaths answer).
func (s *Stack) StartN8N(ctx context.Context, webhookPaths ...string) error {
	url, err := s.rt.startN8N(ctx)
	if err != nil {
		return err
	}
	if s.WebhookURL == s.N8NURL {
		s.WebhookURL = url
	}
	s.N8NURL = url
	deadline := time.Now().Add(time.Minute)
	for _, p := range webhookPaths {
		for !s.webhookRegistered(ctx, p) {
			if time.Now().After(deadline) {
				return fmt.Errorf("n8n restarted but /webhook/%s is not live after a minute (logs: %s)", p, strings.Join(s.Logs(), ", "))
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	return nil
}
