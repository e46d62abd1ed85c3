package policies_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/sidecarops/sidecarops/policies"
)

// minCoverage is the share of policy lines (tests excluded) the Rego tests must evaluate.
const minCoverage = 90.0

func parse(t *testing.T, sources map[string]string) map[string]*ast.Module {
	t.Helper()
	modules := make(map[string]*ast.Module, len(sources))
	for path, src := range sources {
		m, err := ast.ParseModuleWithOpts(path, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			t.Fatalf("parse %s: %v", path, err)
		}
		modules[path] = m
	}
	return modules
}

// TestRegoTests runs every Rego test through policies.Run, the runner `sidecarctl policy test` uses
// (strict compiler, coverage as `opa test --coverage`), so both enforce the same thing.
func TestRegoTests(t *testing.T) {
	report, err := policies.Run(context.Background())
	if err != nil {
		t.Fatalf("running the Rego tests: %v", err)
	}
	for _, r := range report.Results {
		if !r.Pass() {
			t.Errorf("%s", strings.TrimSpace(r.String()))
			if r.Error != nil {
				t.Errorf("  %v", r.Error)
			}
		}
	}
	if !report.Passed() {
		t.Errorf("Rego tests did not pass (%d results)", len(report.Results))
	}
	for _, path := range slices.Sorted(maps.Keys(report.Coverage)) {
		for _, r := range report.Coverage[path].NotCovered {
			t.Logf("%s:%d-%d not covered", path, r.Start.Row, r.End.Row)
		}
	}
	if got := report.CoveragePercent(); got < minCoverage {
		t.Errorf("Rego coverage %.1f%%, want ≥ %.0f%%", got, minCoverage)
	} else {
		t.Logf("Rego coverage %.1f%% of policy lines (tests excluded)", got)
	}
}

// TestModulesCompileAlone guards the bundle: the policies must compile without their tests.
func TestModulesCompileAlone(t *testing.T) {
	modules := parse(t, policies.Modules())
	for path := range modules {
		if strings.HasSuffix(path, "_test.rego") || !strings.HasPrefix(path, policies.PathPrefix) {
			t.Errorf("Modules() returned %s", path)
		}
	}
	for _, want := range []string{"selector", "match", "explain", "conflict", "whitelist"} {
		if _, ok := modules[policies.PathPrefix+want+".rego"]; !ok {
			t.Errorf("Modules() lacks %s.rego", want)
		}
	}
	c := ast.NewCompiler().WithStrict(true)
	if c.Compile(modules); c.Failed() {
		t.Fatalf("policies alone do not compile: %v", c.Errors)
	}
	for path := range policies.TestModules() {
		if !strings.HasSuffix(path, "_test.rego") {
			t.Errorf("TestModules() returned %s", path)
		}
	}
}

// TestExampleBundles keeps the administrators' examples green against these policies, run the way
// `sidecarctl policy test` runs an administrator's directories.
func TestExampleBundles(t *testing.T) {
	for _, dir := range []string{"../examples/whitelist-bundle", "../examples/policies"} {
		report, err := policies.Run(context.Background(), dir)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, r := range report.Results {
			if !r.Pass() {
				t.Errorf("%s: %s", dir, strings.TrimSpace(r.String()))
			}
		}
		if !report.Passed() {
			t.Errorf("%s: tests did not pass", dir)
		}
	}
}
