package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		info debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3 (go1.26.8)"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "1a2b3c4d5e6f7a8b9c0d"}, {Key: "vcs.modified", Value: "true"}}}, "(devel) (revision 1a2b3c4d5e6f, modified; go1.26.8)"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}}, "(devel) (revision abc; go1.26.8)"},
	} {
		if got := describe(&c.info); got != c.want {
			t.Errorf("describe = %q, want %q", got, c.want)
		}
	}
	if got := Describe("idemhook"); !strings.HasPrefix(got, "idemhook ") {
		t.Errorf("Describe = %q", got)
	}
}
