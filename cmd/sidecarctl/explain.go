package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sidecarops/sidecarops/internal/sidecarctl/explain"
)

func explainCmd() *cobra.Command {
	var (
		src     sourceFlags
		install installFlags
		podName string
	)
	cmd := &cobra.Command{
		Use:   "explain -f PATH [-f PATH ...] [--pod NAME]",
		Short: "Say, for each pod and each SidecarSet, whether it matches and why not",
		Long: "explain prints, for every workload's pod (or only --pod NAME) and every SidecarSet, \"matches\" or the\n" +
			"reasons it does not: which selector term failed against which label, namespace, paused, canary, gate.\n" +
			"The reasons come from the match policy itself. SidecarSets a cluster would refuse are reported, not explained.\n\n" +
			"A pod the installed pod webhook never sees (an excluded namespace; its namespace or object selector) is\n" +
			"said to be \"not seen by the webhook\", and why: it is created without sidecars whatever matches it. The\n" +
			"installation is the chart's with --install-values, the cluster's with --kubeconfig, else config/default's;\n" +
			"a note on stderr says which. A pod the injection makes fail the Pod Security level its Namespace enforces\n" +
			"(its pod-security.kubernetes.io/enforce labels, in the input or, with --kubeconfig, the cluster) is said\n" +
			"to, in the webhook's words.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, err := src.input(cmd, "ignored")
			if err != nil {
				return err
			}
			view, err := install.view(cmd.Context(), w.Namespaces, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			view.NoticeOnce()
			found := explain.Workloads(cmd.Context(), cmd.OutOrStdout(), w, view, src.namespace, podName)
			if podName != "" && !found {
				return errors.Join(w.Err(), fmt.Errorf("--pod %q: no workload of that name in the input", podName))
			}
			return w.Err()
		},
	}
	src.register(cmd.Flags())
	install.register(cmd.Flags())
	cmd.Flags().StringVar(&podName, "pod", "", "explain only the workload (pod) of this name")
	return cmd
}
