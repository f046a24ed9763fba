package storezip

import (
	"archive/zip"
	"bytes"
	"io"
	"testing"
)

// archive/zip reads back every file, byte for byte, with its name, stored.
func TestWriteReadsBack(t *testing.T) {
	files := map[string][]byte{"workflow.json": []byte(`{"nodes":[]}`), "schema.sql": []byte("CREATE TABLE t ();\n"), "empty.txt": nil,
		"naïve/ünïcode.md": bytes.Repeat([]byte("x"), 70000)}
	names := []string{"empty.txt", "naïve/ünïcode.md", "schema.sql", "workflow.json"}
	b, err := Write(names, files)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != len(names) {
		t.Fatalf("%d files, want %d", len(zr.File), len(names))
	}
	for i, f := range zr.File {
		if f.Name != names[i] || f.Method != zip.Store {
			t.Errorf("file %d: %q method %d, want %q stored", i, f.Name, f.Method, names[i])
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc) // checks the CRC-32 at the end
		rc.Close()
		if err != nil || !bytes.Equal(got, files[f.Name]) {
			t.Errorf("%s: %v, %d bytes, want %d", f.Name, err, len(got), len(files[f.Name]))
		}
	}
}
