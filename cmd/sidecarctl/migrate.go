package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sidecarops/sidecarops/internal/migrate"
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
			printReport(cmd.OutOrStdout(), r)
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

// pathB is what path B keeps running, and how (docs/migration.md).
const pathB = "OpenKruise keeps running with its pod webhook, sidecarops' pod webhook after it, and the fence keeps OpenKruise's manager off the SidecarSets (docs/migration.md)"

func printReport(out io.Writer, r migrate.Report) {
	fmt.Fprintln(out, "Found:")
	for _, f := range r.Found {
		fmt.Fprintln(out, "  "+f)
	}
	switch {
	case r.Path == migrate.PathA:
		fmt.Fprintln(out, "Path A: nothing of OpenKruise but SidecarSet is in use; OpenKruise stops as a whole (docs/migration.md).")
	case len(r.InUse) > 0:
		fmt.Fprintln(out, "Path B: OpenKruise's other workloads are in use; "+pathB+":")
	default:
		fmt.Fprintln(out, "Path B: pods rely on OpenKruise's pod webhook, which path A would take away with OpenKruise; "+pathB+".")
	}
	for _, u := range r.InUse {
		fmt.Fprintln(out, "  "+u.String())
	}
	switch {
	case r.Kept() && len(r.Features) == 0:
		fmt.Fprintf(out, "Kept: OpenKruise's pod webhook %s.\n", r.KruisePodWebhook)
	case r.Kept():
		fmt.Fprintf(out, "Kept: OpenKruise's pod webhook %s, and with it (path A would lose these):\n", r.KruisePodWebhook)
	case len(r.Features) > 0:
		fmt.Fprintln(out, "Lost: OpenKruise's pod webhook is not registered, and with it:")
	}
	for _, f := range r.Features {
		fmt.Fprintln(out, "  "+f.String())
	}
	for _, blocking := range []bool{true, false} {
		title := "Blocking:"
		if !blocking {
			title = "Warnings:"
		}
		n := 0
		for _, f := range r.Findings {
			if f.Blocker != blocking {
				continue
			}
			if n == 0 {
				fmt.Fprintln(out, title)
			}
			n++
			fmt.Fprintf(out, "  %d. %s\n     fix: %s\n", n, f.Message, f.Fix)
		}
	}
	if !r.Blocked() {
		fmt.Fprintln(out, "Clear: nothing blocks the switch.")
	}
}
