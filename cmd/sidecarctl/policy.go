package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sidecarops/sidecarops/policies"
)

func policyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "policy", Short: "Work with the sidecarops policies"}
	var (
		verbose   bool
		coverage  bool
		threshold float64
	)
	test := &cobra.Command{
		Use:   "test [DIR...]",
		Short: "Run the sidecarops policies' tests plus an administrator's policy directories",
		Long: "policy test runs the Rego tests of the built-in policies and of the given directories (an administrator's\n" +
			"gate or whitelist bundle, with its *_test.rego files) together, like `opa test`, and reports coverage.",
		RunE: func(cmd *cobra.Command, dirs []string) error {
			report, err := policies.Run(cmd.Context(), dirs...)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			passed, failed := 0, 0
			for _, r := range report.Results {
				if r.Pass() {
					passed++
				} else if !r.Skip {
					failed++
				}
				if verbose || !r.Pass() {
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
			if coverage {
				for _, path := range slices.Sorted(maps.Keys(report.Coverage)) {
					fr := report.Coverage[path]
					fmt.Fprintf(out, "coverage %s: %d/%d lines\n", path, fr.CoveredLines, fr.CoveredLines+fr.NotCoveredLines)
				}
				fmt.Fprintf(out, "coverage: %.2f%%\n", pct)
			}
			switch {
			case !report.Passed():
				return fmt.Errorf("policy tests failed")
			case coverage && pct < threshold:
				return fmt.Errorf("coverage %.2f%% is below --threshold %.2f%%", pct, threshold)
			}
			return nil
		},
	}
	test.Flags().BoolVarP(&verbose, "verbose", "v", false, "print every test result")
	test.Flags().BoolVarP(&coverage, "coverage", "c", false, "report coverage of the policies (tests excluded)")
	test.Flags().Float64Var(&threshold, "threshold", 0, "with --coverage, fail below this percentage")
	cmd.AddCommand(test)
	return cmd
}
