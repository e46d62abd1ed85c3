package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/internal/impact"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/installview"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/podcheck"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/workspace"
	"github.com/sidecarops/sidecarops/mutation"
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
			out := cmd.OutOrStdout()
			found := false
			for _, o := range w.Workloads {
				pod, _ := manifest.PodTemplate(o.Obj, src.namespace)
				name := o.Obj.(interface{ GetName() string }).GetName()
				if podName != "" && podName != name {
					continue
				}
				found = true
				raw, err := json.Marshal(pod)
				if err != nil {
					w.Fail(o, err)
					continue
				}
				reasons, err := w.Snapshot.Explain(cmd.Context(), pod.Namespace, raw)
				if err != nil {
					w.Fail(o, err)
					continue
				}
				unseen, err := view.Unseen(cmd.Context(), pod.Namespace, pod)
				if err != nil {
					w.Fail(o, err)
					continue
				}
				warning, err := podSecurityOf(cmd.Context(), w, view, unseen, pod)
				if err != nil {
					w.Fail(o, err)
					continue
				}
				fmt.Fprintf(out, "%s/%s (namespace %s):\n", o.Obj.GetObjectKind().GroupVersionKind().Kind, name, pod.Namespace)
				if unseen != "" {
					fmt.Fprintf(out, "  %s\n", unseen)
				}
				names := make([]string, 0, len(reasons))
				for n := range reasons {
					names = append(names, n)
				}
				sort.Strings(names)
				if len(names) == 0 {
					fmt.Fprintln(out, "  no SidecarSets given")
				}
				for _, n := range names {
					why := strings.Join(reasons[n], "; ")
					if unseen != "" && why == "matches" {
						why = "matches, but the webhook does not see the pod"
					}
					fmt.Fprintf(out, "  %s: %s\n", n, why)
				}
				if warning != nil {
					fmt.Fprintf(out, "  warning: %s\n", warning)
				}
			}
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

// podSecurityOf is what the pod webhook would warn of pod, which it sees unless unseen says why
// not, once injected: nil unless its namespace enforces a Pod Security level. explain injects only
// for that.
func podSecurityOf(ctx context.Context, w *workspace.Workspace, view *installview.View, unseen string, pod *corev1.Pod) (*impact.PodFinding, error) {
	if unseen != "" {
		return nil, nil
	}
	enforced, err := view.Enforced(ctx, pod.Namespace)
	if err != nil || enforced == nil {
		return nil, err
	}
	res, err := injector.Pod(ctx, w.Snapshot, &mutation.Injector{Now: time.Now, Rand: rand.Float64}, injector.PodRequest{Pod: pod.DeepCopy()})
	if err != nil {
		return nil, err
	}
	return podcheck.PodSecurity(w, enforced, pod, res), nil
}
