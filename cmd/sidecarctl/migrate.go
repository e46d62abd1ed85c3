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
		kubeconfig string
		opts       migrate.Options
	)
	check := &cobra.Command{
		Use:   "check --kubeconfig FILE",
		Short: "Read-only preflight: what OpenKruise left, and what blocks a safe switch, with the commands that clear it",
		Long: "check reads the cluster and lists the SidecarSet CRD and its conversion, OpenKruise's webhooks and\n" +
			"controller, the SidecarSets, their ControllerRevisions and the injected pods. It says which path of\n" +
			"docs/migration.md the cluster takes: A (stop OpenKruise) when nothing of OpenKruise but SidecarSet is in\n" +
			"use, else B (keep it with PodWebhook=false and the fence), naming the kinds in use and what goes with\n" +
			"OpenKruise's pod webhook. Then every blocker (double injection, two controllers, a conversion served by\n" +
			"OpenKruise) and warning, each with the command that deals with it. It writes nothing. Exit status 1\n" +
			"while anything blocks.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if kubeconfig == "" {
				return errors.New("--kubeconfig is required")
			}
			c, err := liveClient(kubeconfig)
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
	check.Flags().StringVar(&kubeconfig, "kubeconfig", "", "the cluster to read")
	check.Flags().StringVar(&opts.KruiseNamespace, "kruise-namespace", migrate.KruiseNamespace, "OpenKruise's namespace")
	check.Flags().StringVar(&opts.Namespace, "namespace", "sidecarops-system", "sidecarops' namespace")
	cmd.AddCommand(check)
	return cmd
}

func printReport(out io.Writer, r migrate.Report) {
	fmt.Fprintln(out, "Found:")
	for _, f := range r.Found {
		fmt.Fprintln(out, "  "+f)
	}
	switch r.Path {
	case migrate.PathA:
		fmt.Fprintln(out, "Path A: nothing of OpenKruise but SidecarSet is in use; OpenKruise stops as a whole (docs/migration.md).")
	case migrate.PathB:
		fmt.Fprintln(out, "Path B: OpenKruise's other workloads are in use; OpenKruise keeps running with PodWebhook=false, and the fence keeps it off the SidecarSets (docs/migration.md):")
		for _, u := range r.InUse {
			fmt.Fprintln(out, "  "+u.String())
		}
	}
	if len(r.Losses) > 0 {
		fmt.Fprintln(out, "What goes with OpenKruise's pod webhook (if these pods need it, keep OpenKruise's SidecarSet for now: docs/decisions.md D10):")
		for _, l := range r.Losses {
			fmt.Fprintln(out, "  "+l)
		}
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
