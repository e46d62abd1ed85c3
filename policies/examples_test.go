package policies_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sidecarops/sidecarops/policies"
)

var updateExamples = flag.Bool("update-examples", false, "rewrite the policy copies under examples/whitelist-bundle")

// whitelistCopies are the policies the whitelist example's tests exercise, each with the file its copy
// is kept in. A Rego test cannot load a module, so for `opa test examples/whitelist-bundle` to run
// them alone the directory holds them, in packages of its test's own (whitelist_test.sidecarops.*, so
// that loading them beside policies/ clashes with nothing); the _test.rego name keeps them out of the
// bundle, as `opa build --ignore '*_test.rego'` and sidecarops' bundle reader leave tests out.
var whitelistCopies = []struct{ policy, copy string }{
	{"whitelist.rego", "sidecarops_whitelist_test.rego"},
	{"selector.rego", "sidecarops_selector_test.rego"},
}

const exampleDir = "../examples/whitelist-bundle"

// TestExampleWhitelistPolicyCopies keeps the copies equal to the policies they are generated from.
func TestExampleWhitelistPolicyCopies(t *testing.T) {
	modules := policies.Modules()
	for _, c := range whitelistCopies {
		src, ok := modules[policies.PathPrefix+c.policy]
		if !ok {
			t.Fatalf("no policy %s", c.policy)
		}
		want := exampleCopy(c.policy, src)
		path := filepath.Join(exampleDir, c.copy)
		if *updateExamples {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v: run `go test ./policies -run %s -update-examples`", err, t.Name())
		}
		if string(got) != want {
			t.Errorf("%s is not policies/%s as copied: run `go test ./policies -run %s -update-examples`", path, c.policy, t.Name())
		}
	}
}

func exampleCopy(policy, src string) string {
	header := fmt.Sprintf("# A copy of policies/%s for the tests of this directory (whitelist_test.rego), so that\n"+
		"# `opa test examples/whitelist-bundle` alone runs them against the policy sidecarops enforces.\n"+
		"# Generated: go test ./policies -run TestExampleWhitelistPolicyCopies -update-examples\n\n", policy)
	src = strings.ReplaceAll(src, "package sidecarops.", "package whitelist_test.sidecarops.")
	return header + strings.ReplaceAll(src, "import data.sidecarops.", "import data.whitelist_test.sidecarops.")
}
