package policies

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
)

// TestReport is the outcome of Run: every Rego test result and line coverage per policy file.
type TestReport struct {
	Results []*tester.Result
	// Coverage maps each non-test policy file (ours, then the extra directories') to its report.
	Coverage map[string]*cover.FileReport
}

// Passed reports whether at least one test ran and none failed or errored.
func (r *TestReport) Passed() bool {
	for _, res := range r.Results {
		if res.Fail || res.Error != nil {
			return false
		}
	}
	return len(r.Results) > 0
}

// CoveragePercent is the share of policy lines (tests excluded) the tests evaluated.
func (r *TestReport) CoveragePercent() float64 {
	covered, total := 0, 0
	for _, fr := range r.Coverage {
		covered += fr.CoveredLines
		total += fr.CoveredLines + fr.NotCoveredLines
	}
	if total == 0 {
		return 0
	}
	return 100 * float64(covered) / float64(total)
}

// Run runs the embedded policies' Rego tests together with the policies and tests found under
// extraPaths (an administrator's bundle directories: .rego files and data.json documents), with the
// strict compiler `opa check --strict` uses, recording coverage as `opa test --coverage` does.
func Run(ctx context.Context, extraPaths ...string) (*TestReport, error) {
	modules := map[string]*ast.Module{}
	var store = inmem.New()
	if len(extraPaths) > 0 {
		var err error
		if modules, store, err = tester.LoadWithParserOptions(extraPaths, nil, ast.ParserOptions{RegoVersion: ast.RegoV1}); err != nil {
			return nil, err
		}
	}
	ours := Modules()
	maps.Copy(ours, TestModules())
	for path, src := range ours {
		m, err := ast.ParseModuleWithOpts(path, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, fmt.Errorf("embedded policy %s: %w", path, err)
		}
		modules[path] = m
	}
	cov := cover.New()
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return nil, err
	}
	defer store.Abort(ctx, txn)
	ch, err := tester.NewRunner().
		SetCompiler(ast.NewCompiler().WithStrict(true)).
		SetStore(store).
		SetCoverageQueryTracer(cov).
		SetModules(modules).
		SetTimeout(time.Minute).
		RunTests(ctx, txn)
	if err != nil {
		return nil, err
	}
	report := &TestReport{Coverage: map[string]*cover.FileReport{}}
	for r := range ch {
		report.Results = append(report.Results, r)
	}
	full := cov.Report(modules)
	for _, path := range slices.Sorted(maps.Keys(modules)) {
		if isTestFile(path) {
			continue
		}
		if fr := full.Files[path]; fr != nil {
			report.Coverage[path] = fr
		} else {
			// A policy file no test touched is 0% covered, not absent from the figure.
			report.Coverage[path] = &cover.FileReport{NotCoveredLines: countLines(modules[path])}
		}
	}
	return report, nil
}

func isTestFile(path string) bool {
	return len(path) > len("_test.rego") && path[len(path)-len("_test.rego"):] == "_test.rego"
}

func countLines(m *ast.Module) int {
	n := 0
	for _, r := range m.Rules {
		if r.Location != nil {
			n += 1 + countNewlines(r.Location.Text)
		}
	}
	return n
}

func countNewlines(b []byte) int {
	n := 0
	for _, c := range b {
		if c == '\n' {
			n++
		}
	}
	return n
}
