// Package buildinfo says which build of idemhook is running, from what the
// Go toolchain records in every binary: the module version (a tag for
// `go install …@v1.2.3`, "(devel)" for a build from a clone) and, for a
// build from a clone, the VCS revision and whether the tree was modified.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Describe is one line for `--version`: "idemhook v1.2.3 (revision
// 1a2b3c4d5e6f, modified; go1.26.8)".
func Describe(command string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return command + " (no build information: built without module support)"
	}
	return command + " " + describe(info)
}

func describe(info *debug.BuildInfo) string {
	version := info.Main.Version
	if version == "" {
		version = "(devel)"
	}
	var details []string
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		d := "revision " + rev[:min(len(rev), 12)]
		if settings["vcs.modified"] == "true" {
			d += ", modified"
		}
		details = append(details, d)
	}
	details = append(details, info.GoVersion)
	return version + " (" + strings.Join(details, "; ") + ")"
}
