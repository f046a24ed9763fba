package history

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// Report is what Check found.
type Report struct {
	// Operations is how many were checked: every recorded one but the
	// lookups that got no answer (they change nothing).
	Operations int
	// Open is how many of them never got an answer, kept open.
	Open int
	Keys int
	// Illegal lists the keys whose history no order of its operations
	// explains; Undecided those Porcupine did not decide in time (neither
	// passes).
	Illegal, Undecided []string
	// Visualization is the HTML file showing the illegal keys' histories,
	// when there are some.
	Visualization string
}

// Failed says whether the history was not shown linearizable.
func (r Report) Failed() bool { return len(r.Illegal) > 0 || len(r.Undecided) > 0 }

func (r Report) String() string {
	s := fmt.Sprintf("%d operations on %d keys checked (%d without an answer, kept open): ", r.Operations, r.Keys, r.Open)
	if !r.Failed() {
		return s + "linearizable"
	}
	s += fmt.Sprintf("%d keys not linearizable %v, %d undecided %v", len(r.Illegal), head(r.Illegal), len(r.Undecided), head(r.Undecided))
	if r.Visualization != "" {
		s += "; Porcupine's view of them: " + r.Visualization
	}
	return s
}

func head(keys []string) []string { return keys[:min(len(keys), 10)] }

// chunkOps is about how many operations one Porcupine call checks (it
// runs a goroutine per key); timeout bounds each call.
const (
	chunkOps      = 20000
	chunkTimeout  = time.Minute
	keyTimeout    = 20 * time.Second
	visualizeKeys = 8
)

// Check checks rec's history against Model, key by key. When a key fails,
// the histories of the first few failing keys are written as Porcupine's
// HTML visualisation into dir, in a file named after label.
func Check(rec *Recorder, dir, label string) (Report, error) {
	ops, open := rec.operations()
	byKey := map[string][]porcupine.Operation{}
	for _, op := range ops {
		k := op.Input.(Input).Key
		byKey[k] = append(byKey[k], op)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	rep := Report{Operations: len(ops), Open: open, Keys: len(keys)}
	model := Model()
	var chunk []porcupine.Operation
	var chunkKeys []string
	flush := func() {
		if len(chunk) > 0 && porcupine.CheckOperationsTimeout(model, chunk, chunkTimeout) != porcupine.Ok {
			for _, k := range chunkKeys {
				switch porcupine.CheckOperationsTimeout(model, byKey[k], keyTimeout) {
				case porcupine.Illegal:
					rep.Illegal = append(rep.Illegal, k)
				case porcupine.Unknown:
					rep.Undecided = append(rep.Undecided, k)
				}
			}
		}
		chunk, chunkKeys = chunk[:0], chunkKeys[:0]
	}
	for _, k := range keys {
		chunk = append(chunk, byKey[k]...)
		chunkKeys = append(chunkKeys, k)
		if len(chunk) >= chunkOps {
			flush()
		}
	}
	flush()
	if len(rep.Illegal) == 0 {
		return rep, nil
	}
	path, err := visualize(model, byKey, head(rep.Illegal)[:min(len(rep.Illegal), visualizeKeys)], dir, label)
	rep.Visualization = path
	return rep, err
}

// visualize writes Porcupine's view of keys' histories (their longest
// partial linearizations, and where each failed) into dir.
func visualize(model porcupine.Model, byKey map[string][]porcupine.Operation, keys []string, dir, label string) (string, error) {
	var ops []porcupine.Operation
	clients := map[int]int{} // Porcupine draws a row per client id: keep them few
	for _, k := range keys {
		for _, op := range byKey[k] {
			id, ok := clients[op.ClientId]
			if !ok {
				id = len(clients)
				clients[op.ClientId] = id
			}
			op.ClientId = id
			ops = append(ops, op)
		}
	}
	_, info := porcupine.CheckOperationsVerbose(model, ops, chunkTimeout)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("the visualisation's folder: %w", err)
	}
	path := filepath.Join(dir, fmt.Sprintf("keysvc-history-%s-%s.html", label, time.Now().UTC().Format("20060102T150405")))
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		return "", fmt.Errorf("write Porcupine's visualisation: %w", err)
	}
	return path, nil
}
