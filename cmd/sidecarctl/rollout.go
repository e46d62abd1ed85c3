package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sidecarops/sidecarops/internal/sidecarctl/rolloutplan"
)

func rolloutCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Show where SidecarSet rollouts stand and what the controller will do next",
	}
	cmd.AddCommand(rolloutPlanCmd())
	return cmd
}

func rolloutPlanCmd() *cobra.Command {
	var (
		src     sourceFlags
		cluster clusterFlags
		rounds  int
		output  string
	)
	cmd := &cobra.Command{
		Use:   "plan (-f PATH [-f PATH ...] [SIDECARSET] | [--kubeconfig FILE] [--context NAME] SIDECARSET)",
		Short: "Which pods a SidecarSet's controller upgrades now, which wait and why, and the rounds after",
		Long: "plan runs the controller's own decision (compat §3.7) over a SidecarSet and its pods: which pods are\n" +
			"updated, upgraded now, in flight, held by maxUnavailable, partition or updateStrategy.selector, and not\n" +
			"upgradable (with the reason); then the rounds that would follow, assuming the kubelet applies each\n" +
			"upgrade and pods stay ready.\n\n" +
			"From files (-f): SidecarSets, their Pods as stored (e.g. `kubectl get pods -o yaml`), and Namespaces for\n" +
			"namespaceSelector; every SidecarSet, or only SIDECARSET. Live (without -f): reads SIDECARSET and its\n" +
			"pods from the cluster kubectl would read (--kubeconfig, else $KUBECONFIG, else ~/.kube/config, and\n" +
			"--context), read-only.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if rounds < 0 {
				return usageError{fmt.Errorf("--rounds: %d is negative", rounds)}
			}
			format, err := planFormat(output)
			if err != nil {
				return err
			}
			var plans []rolloutplan.Plan
			switch {
			case cluster.given() && len(src.files) > 0:
				return usageError{errors.New("give either -f files or a cluster (--kubeconfig, --context), not both")}
			case len(src.files) == 0:
				if len(args) == 0 {
					return usageError{errors.New("give -f files, or the SidecarSet's name to read it from the cluster")}
				}
				c, err := cluster.client()
				if err != nil {
					return err
				}
				p, err := rolloutplan.Live(cmd.Context(), c, args[0], rounds)
				if err != nil {
					return err
				}
				plans = append(plans, p)
			default:
				w, err := src.input(cmd, "ignored")
				if err != nil {
					return err
				}
				var only string
				if len(args) == 1 {
					only = args[0]
				}
				var problems error
				if plans, problems, err = rolloutplan.FromWorkspace(w, src.namespace, only, rounds); err != nil {
					return err
				}
				if err := rolloutplan.Print(cmd.OutOrStdout(), format, plans); err != nil {
					return err
				}
				return problems
			}
			return rolloutplan.Print(cmd.OutOrStdout(), format, plans)
		},
	}
	src.register(cmd.Flags())
	cluster.register(cmd.Flags(), "read the SidecarSet and its pods from the cluster instead of files")
	cmd.Flags().IntVar(&rounds, "rounds", 10, "how many rounds ahead to forecast")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func planFormat(o string) (string, error) {
	switch o {
	case "text", "json":
		return o, nil
	}
	return "", usageError{fmt.Errorf("--output: %q is not text or json", o)}
}
