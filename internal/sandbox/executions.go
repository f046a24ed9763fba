package sandbox

import (
	"context"
	"fmt"
	"time"
)

// Execution is one row of n8n's execution_entity.
type Execution struct {
	ID     string
	Status string
}

// Executions lists a workflow's executions, oldest first.
func (s *Stack) Executions(ctx context.Context, workflowID string) ([]Execution, error) {
	rows, err := s.N8NDB.Query(ctx, `SELECT id::text, status FROM execution_entity WHERE "workflowId" = $1 ORDER BY execution_entity.id`, workflowID)
	if err != nil {
		return nil, fmt.Errorf("list executions of %s: %w", workflowID, err)
	}
	defer rows.Close()
	var out []Execution
	for rows.Next() {
		var e Execution
		if err := rows.Scan(&e.ID, &e.Status); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// WaitExecutions waits until the workflow has at least n finished
// executions (n8n records them just after the response is sent) and returns
// them all.
func (s *Stack) WaitExecutions(ctx context.Context, workflowID string, n int) ([]Execution, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		execs, err := s.Executions(ctx, workflowID)
		if err != nil {
			return nil, err
		}
		finished := 0
		for _, e := range execs {
			if e.Status != "new" && e.Status != "running" && e.Status != "waiting" {
				finished++
			}
		}
		if finished >= n || time.Now().After(deadline) {
			return execs, nil
		}
		select {
		case <-ctx.Done():
			return execs, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
