package version

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGet(t *testing.T) {
	built := func(version, revision string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			bi := &debug.BuildInfo{Main: debug.Module{Version: version}}
			if revision != "" {
				bi.Settings = []debug.BuildSetting{{Key: "vcs.revision", Value: revision}}
			}
			return bi, true
		}
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	tests := []struct {
		name                    string
		version, commit         string
		read                    func() (*debug.BuildInfo, bool)
		wantVersion, wantCommit string
	}{
		{"stamped wins", "v1.2.3", "abc", built("v9.9.9", "def"), "v1.2.3", "abc"},
		{"go install of a tag", "", "", built("v1.2.3", ""), "v1.2.3", "unknown"},
		{"a build in a checkout", "", "", built("(devel)", "0a1b2c3"), "devel", "0a1b2c3"},
		{"no build information", "", "", none, "devel", "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := get(tt.version, tt.commit, tt.read)
			assert.Equal(t, tt.wantVersion, i.Version)
			assert.Equal(t, tt.wantCommit, i.Commit)
			assert.Equal(t, runtime.Version(), i.GoVersion)
			assert.Regexp(t, `^v1\.\d+\.\d+`, i.OPA)
		})
	}
	assert.Equal(t, "sidecarctl v1.2.3 (commit abc, go1.26.8, OPA v1.22.3)",
		Info{Version: "v1.2.3", Commit: "abc", GoVersion: "go1.26.8", OPA: "v1.22.3"}.String("sidecarctl"))
}
