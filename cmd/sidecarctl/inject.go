package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/inject"
)

func injectCmd() *cobra.Command {
	var (
		src       sourceFlags
		install   installFlags
		output    string
		patch     bool
		timestamp string
	)
	cmd := &cobra.Command{
		Use:   "inject -f PATH [-f PATH ...] [-o yaml|json] [--patch] [--timestamp RFC3339]",
		Short: "Print the workloads as the webhook would inject their pods",
		Long: "inject reads SidecarSets and workloads (Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob,\n" +
			"and OpenKruise's CloneSet, Advanced StatefulSet, Advanced DaemonSet, BroadcastJob) and prints the workloads,\n" +
			"in input order, with the sidecars injected into their pod templates; documents of kinds it does not read\n" +
			"are printed among them unchanged. With --patch it prints, per workload, the RFC 6902 patch the webhook\n" +
			"would answer for such a pod, its paths leading into the workload's pod template.\n\n" +
			"A document that does not decode, a SidecarSet a cluster would refuse and a workload whose pods it would\n" +
			"refuse are reported on stderr and left out; the rest is printed, injected with the SidecarSets a cluster\n" +
			"would have admitted, and the exit status is 1. A workload whose pods the injection makes fail the Pod\n" +
			"Security level their Namespace enforces (its pod-security.kubernetes.io/enforce labels, in the input or,\n" +
			"with --kubeconfig, the cluster) is warned about on stderr, as the webhook warns.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(output)
			if err != nil {
				return err
			}
			now := time.Now
			if timestamp != "" {
				t, err := time.Parse(time.RFC3339, timestamp)
				if err != nil {
					return usageError{fmt.Errorf("--timestamp %q: not RFC3339: %w", timestamp, err)}
				}
				now = func() time.Time { return t }
			}
			others := "passed through unchanged"
			if patch {
				others = "ignored (no patch)"
			}
			w, err := src.input(cmd, others)
			if err != nil {
				return err
			}
			view, err := install.view(cmd.Context(), w.Namespaces, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			res := inject.Workloads(cmd.Context(), w, inject.Options{Namespace: src.namespace, Now: now, View: view,
				Notes: cmd.ErrOrStderr(), Patch: patch})
			if patch {
				err = inject.WritePatches(cmd.OutOrStdout(), format, res.Patches)
			} else {
				err = manifest.Encode(cmd.OutOrStdout(), format, res.Objects...)
			}
			if err != nil {
				return err
			}
			return w.Err()
		},
	}
	src.register(cmd.Flags())
	install.register(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	cmd.Flags().BoolVar(&patch, "patch", false, "print the RFC 6902 patch per workload instead of the workloads")
	cmd.Flags().StringVar(&timestamp, "timestamp", "", "RFC3339 time to record in the sidecarset-hash annotations (default: now)")
	return cmd
}

func outputFormat(o string) (manifest.Format, error) {
	switch o {
	case "yaml", "":
		return manifest.YAML, nil
	case "json":
		return manifest.JSON, nil
	}
	return "", usageError{fmt.Errorf("-o %q: unsupported output format (yaml or json)", o)}
}
