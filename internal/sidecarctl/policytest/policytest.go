package policytest

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/sidecarops/sidecarops/policies"
)

// Options say what the report shows beside the failures: every result (Verbose), and the
// coverage of each policy file and in all (Coverage), which must reach Threshold percent.
type Options struct {
	Verbose   bool
	Coverage  bool
	Threshold float64
}

// Write prints report as opts say; the error says why the run fails: a test failed, or the
// coverage asked for is below the threshold.
func Write(out io.Writer, report *policies.TestReport, opts Options) error {
	passed, failed := 0, 0
	for _, r := range report.Results {
		if r.Pass() {
			passed++
		} else if !r.Skip {
			failed++
		}
		if opts.Verbose || !r.Pass() {
			fmt.Fprintln(out, strings.TrimSpace(r.String()))
			if r.Error != nil {
				fmt.Fprintf(out, "  %v\n", r.Error)
			}
		}
	}
	fmt.Fprintln(out, strings.Repeat("-", 80))
	if failed > 0 {
		fmt.Fprintf(out, "PASS: %d/%d\nFAIL: %d/%d\n", passed, len(report.Results), failed, len(report.Results))
	} else {
		fmt.Fprintf(out, "PASS: %d/%d\n", passed, len(report.Results))
	}
	pct := report.CoveragePercent()
	if opts.Coverage {
		for _, path := range slices.Sorted(maps.Keys(report.Coverage)) {
			fr := report.Coverage[path]
			fmt.Fprintf(out, "coverage %s: %d/%d lines\n", path, fr.CoveredLines, fr.CoveredLines+fr.NotCoveredLines)
		}
		fmt.Fprintf(out, "coverage: %.2f%%\n", pct)
	}
	switch {
	case !report.Passed():
		return errors.New("policy tests failed")
	case opts.Coverage && pct < opts.Threshold:
		return fmt.Errorf("coverage %.2f%% is below --threshold %.2f%%", pct, opts.Threshold)
	}
	return nil
}
