package version

import (
	"cmp"
	"fmt"
	"runtime"
	"runtime/debug"

	opaversion "github.com/open-policy-agent/opa/v1/version"
)

// Version and Commit are stamped by the build: go build -ldflags "-X
// github.com/sidecarops/sidecarops/internal/version.Version=v1.2.3 -X …Commit=<sha>". Left empty,
// Get reads what the Go toolchain recorded.
var (
	Version string
	Commit  string
)

// Info is a binary's identity.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	OPA       string `json:"opaVersion"`
}

// Get is this binary's Info: the stamped values, else the module version and VCS revision the Go
// toolchain recorded (a `go install …@vX` build, a build in a checkout), else "devel" and "unknown".
func Get() Info {
	return get(Version, Commit, debug.ReadBuildInfo)
}

func get(version, commit string, read func() (*debug.BuildInfo, bool)) Info {
	if bi, ok := read(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			version = cmp.Or(version, v)
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				commit = cmp.Or(commit, s.Value)
			}
		}
	}
	return Info{
		Version:   cmp.Or(version, "devel"),
		Commit:    cmp.Or(commit, "unknown"),
		GoVersion: runtime.Version(),
		OPA:       "v" + opaversion.Version,
	}
}

// String is the line --version prints, e.g. "sidecarctl v1.2.3 (commit 0a1b2c3, go1.26.8, OPA v1.22.3)".
func (i Info) String(binary string) string {
	return fmt.Sprintf("%s %s (commit %s, %s, OPA %s)", binary, i.Version, i.Commit, i.GoVersion, i.OPA)
}
