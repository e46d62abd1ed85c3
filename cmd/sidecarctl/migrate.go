package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sidecarops/sidecarops/internal/migrate"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/migratecheck"
)

func migrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Take a cluster over from a running OpenKruise",
	}
	var (
		cluster clusterFlags
		opts    migrate.Options
	)
	check := &cobra.Command{
		Use:   "check [--kubeconfig FILE] [--context NAME]",
		Short: "Read-only preflight: what OpenKruise left, and what blocks a safe switch, with the commands that clear it",
		Long: "check reads the cluster and lists the SidecarSet CRD and its conversion, OpenKruise's webhooks and\n" +
			"controller, the SidecarSets, their ControllerRevisions and the injected pods. It says which path of\n" +
			"docs/migration.md the cluster takes: A (stop OpenKruise) when nothing of OpenKruise but SidecarSet is in\n" +
			"use and no pod relies on its pod webhook, else B (keep it and its pod webhook, sidecarops' pod webhook\n" +
			"after it, and the fence), naming the kinds in use and what OpenKruise's pod webhook does for the\n" +
			"objects and pods here, kept or lost. Then every blocker (double injection, two controllers, a\n" +
			"conversion served by OpenKruise on path A, a whitelist left behind) and warning (pods OpenKruise\n" +
			"injected that sidecarops' pod webhook will not see), each with the command that deals with it. It\n" +
			"writes nothing; pods are read a page at a time. Exit status 1 while anything blocks.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.PageSize <= 0 {
				return usageError{fmt.Errorf("--page-size %d: must be positive", opts.PageSize)}
			}
			c, err := cluster.client()
			if err != nil {
				return err
			}
			r, err := migrate.Check(cmd.Context(), c, opts)
			if err != nil {
				return err
			}
			migratecheck.Write(cmd.OutOrStdout(), r)
			if r.Blocked() {
				return errors.New("blocked: clear the blockers above, then run check again")
			}
			return nil
		},
	}
	cluster.register(check.Flags(), "the cluster to read")
	check.Flags().StringVar(&opts.KruiseNamespace, "kruise-namespace", migrate.KruiseNamespace, "OpenKruise's namespace: its manager's, its whitelist's and the SidecarSets' history's")
	check.Flags().StringVar(&opts.Namespace, "namespace", "sidecarops-system", "sidecarops' namespace: its manager's, whose flags are read (where none is installed yet, the chart's defaults there)")
	check.Flags().Int64Var(&opts.PageSize, "page-size", migrate.DefaultPageSize, "pods read per request")
	cmd.AddCommand(check)
	return cmd
}
