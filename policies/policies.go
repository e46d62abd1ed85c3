package policies

import (
	"embed"
	"io/fs"
	"strings"
)

//go:embed *.rego
var files embed.FS

// PathPrefix is prepended to every file name in the maps returned below: it places the policies
// under the bundle root their packages live in.
const PathPrefix = "sidecarops/"

// Modules returns the policy modules (tests excluded), bundle path → Rego source. The map is new on
// every call, so callers may add their own modules to it.
func Modules() map[string]string { return load(false) }

// TestModules returns the Rego test modules, bundle path → Rego source. They are never part of a
// compiled bundle.
func TestModules() map[string]string { return load(true) }

func load(tests bool) map[string]string {
	names, err := fs.Glob(files, "*.rego")
	if err != nil {
		panic(err) // the pattern is a constant; an error here is a programming error
	}
	out := make(map[string]string, len(names))
	for _, name := range names {
		if strings.HasSuffix(name, "_test.rego") != tests {
			continue
		}
		src, err := files.ReadFile(name)
		if err != nil {
			panic(err) // embedded at build time: cannot be missing
		}
		out[PathPrefix+name] = string(src)
	}
	return out
}
