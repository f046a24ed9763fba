package keysvc

import (
	"net/http"
	"strconv"
	"time"
)

// backupStall bounds how long one write of a backup to its client may take:
// the copy's read transaction holds the pages writers free meanwhile (the
// file grows instead of reusing them), so a client that stops reading is
// cut off rather than held for --write-timeout or forever.
const backupStall = time.Minute

// backup is GET /v1/backup: a consistent copy of the embedded store, as
// one read transaction sees it (bbolt's Tx.WriteTo), while reservations go
// on. On PostgreSQL it is 501: the keys are PostgreSQL's to back up.
func (s *Server) backup(w http.ResponseWriter, r *http.Request) error {
	if s.embedded == nil {
		return httpError(http.StatusNotImplemented, "backup_unavailable",
			"this keysvc keeps its keys in PostgreSQL: back them up with PostgreSQL's own backups (pg_dump, or your provider's)")
	}
	rc := http.NewResponseController(w)
	started := false
	n, err := s.embedded.Backup(func(size int64) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		w.Header().Set("Content-Disposition", `attachment; filename="keysvc-backup.db"`)
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		started = true
	}, writerFunc(func(p []byte) (int, error) {
		_ = rc.SetWriteDeadline(time.Now().Add(backupStall))
		return w.Write(p)
	}))
	if err != nil && !started {
		return err // the store could not begin the copy: 503
	}
	if err != nil {
		// The status is sent: the client sees fewer bytes than the
		// Content-Length said (curl exits 18), never a whole-looking copy.
		s.cfg.Logger.Error("backup cut short", "request_id", w.Header().Get("X-Request-Id"), "bytes", n, "error", err)
		return nil
	}
	s.cfg.Logger.Info("backup sent", "request_id", w.Header().Get("X-Request-Id"), "bytes", n)
	return nil
}

// writerFunc is a function as an io.Writer.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
