package main

import (
	"github.com/spf13/cobra"

	"github.com/sidecarops/sidecarops/internal/sidecarctl/policytest"
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
			return policytest.Write(cmd.OutOrStdout(), report, policytest.Options{Verbose: verbose, Coverage: coverage, Threshold: threshold})
		},
	}
	test.Flags().BoolVarP(&verbose, "verbose", "v", false, "print every test result")
	test.Flags().BoolVarP(&coverage, "coverage", "c", false, "report coverage of the policies (tests excluded)")
	test.Flags().Float64Var(&threshold, "threshold", 0, "with --coverage, fail below this percentage")
	cmd.AddCommand(test)
	return cmd
}
