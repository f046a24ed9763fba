//go:build !planner_embed

package planner

// embedded: this build carries no module (embed_on.go says how one does);
// the module is built from source the first time the page is needed.
func embedded() (gz, execJS []byte, ok bool) { return nil, nil, false }
