package policies_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/tester"

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

// TestRegoTests runs every Rego test as `opa test --coverage` would, under `opa check --strict` rules
// and with builtin errors raised.
func TestRegoTests(t *testing.T) {
	sources := policies.Modules()
	maps.Copy(sources, policies.TestModules())
	modules := parse(t, sources)

	cov := cover.New()
	results, err := tester.NewRunner().
		SetCompiler(ast.NewCompiler().WithStrict(true)).
		RaiseBuiltinErrors(true). // a policy that leans on a swallowed builtin error is a bug
		SetCoverageQueryTracer(cov).
		SetModules(modules).
		SetTimeout(time.Minute).
		RunTests(context.Background(), nil)
	if err != nil {
		t.Fatalf("compiling the policies and their tests: %v", err)
	}
	ran := 0
	for r := range results {
		ran++
		if !r.Pass() {
			t.Errorf("%s", strings.TrimSpace(r.String()))
			if r.Error != nil {
				t.Errorf("  %v", r.Error)
			}
		}
	}
	if ran == 0 {
		t.Fatal("no Rego tests found")
	}

	report := cov.Report(modules)
	covered, notCovered := 0, 0
	for _, path := range slices.Sorted(maps.Keys(policies.Modules())) {
		fr := report.Files[path]
		if fr == nil {
			t.Errorf("%s: no coverage recorded", path)
			continue
		}
		covered += fr.CoveredLines
		notCovered += fr.NotCoveredLines
		for _, r := range fr.NotCovered {
			t.Logf("%s:%d-%d not covered", path, r.Start.Row, r.End.Row)
		}
	}
	if total := covered + notCovered; total == 0 || 100*float64(covered)/float64(total) < minCoverage {
		t.Errorf("Rego coverage %d/%d lines, want ≥ %.0f%%", covered, total, minCoverage)
	} else {
		t.Logf("Rego coverage %.1f%% (%d/%d lines, tests excluded)", 100*float64(covered)/float64(total), covered, total)
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
