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
			"controller, the SidecarSets, their ControllerRevisions and the injected pods; then every blocker (double\n" +
			"injection, two controllers, a conversion served by OpenKruise) and warning, each with the command that\n" +
			"deals with it. It writes nothing. Exit status 1 while anything blocks.",
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
