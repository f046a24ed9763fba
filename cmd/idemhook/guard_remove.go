package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"

	"github.com/idemhook/idemhook/internal/guard"
)

// removeFile takes the guard out of an exported guarded workflow (and out
// of its error workflow when given) and writes the original.
func removeFile(file, out, errorFile string, force bool, errorWF *guard.Workflow, stdout io.Writer) error {
	if file == "" || out == "" {
		return usagef("give --workflow FILE (the guarded export) and --out FILE (where the original goes), or --n8n-url with --workflow-id or --workflow-name")
	}
	if err := checkOut(out, force, file, errorFile); err != nil {
		return err
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return asUsage(err)
	}
	removed, err := guard.RemoveExport(raw, guard.RemoveOptions{ErrorWorkflow: errorWF})
	if err != nil {
		return asUsage(err)
	}
	files := map[string][]byte{filepath.Base(out): removed.Workflow}
	if removed.ErrorWorkflow != nil {
		files[guard.FileRemovedErrorWorkflow] = removed.ErrorWorkflow
	}
	dir := filepath.Dir(out)
	for name, b := range files {
		if old, err := os.ReadFile(filepath.Join(dir, name)); err == nil && !bytes.Equal(old, b) {
			return usagef("%s exists with other content: write to another folder; nothing was written", filepath.Join(dir, name))
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeFiles(dir, files, stdout); err != nil {
		return err
	}
	removed.WriteSummary(stdout, errorWF != nil)
	return nil
}
