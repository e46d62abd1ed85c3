package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/controller/managed"
	"github.com/sidecarops/sidecarops/controller/rollout"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
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
			var plans []sidecarSetPlan
			switch {
			case cluster.given() && len(src.files) > 0:
				return usageError{errors.New("give either -f files or a cluster (--kubeconfig, --context), not both")}
			case len(src.files) == 0:
				if len(args) == 0 {
					return usageError{errors.New("give -f files, or the SidecarSet's name to read it from the cluster")}
				}
				p, err := livePlan(cmd.Context(), cluster, args[0], rounds)
				if err != nil {
					return err
				}
				plans = append(plans, p)
			default:
				var problems error
				if plans, problems, err = filePlans(cmd, &src, args, rounds); err != nil {
					return err
				}
				if err := printPlans(cmd.OutOrStdout(), format, plans); err != nil {
					return err
				}
				return problems
			}
			return printPlans(cmd.OutOrStdout(), format, plans)
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

// sidecarSetPlan is what `rollout plan` reports for one SidecarSet; pods are namespace/name.
type sidecarSetPlan struct {
	SidecarSet     string                   `json:"sidecarSet"`
	LatestRevision string                   `json:"latestRevision,omitempty"`
	Status         v1beta1.SidecarSetStatus `json:"status"`
	Stopped        string                   `json:"stopped,omitempty"`
	Partition      int                      `json:"partition"`
	MaxUnavailable int                      `json:"maxUnavailable"`
	Unavailable    int                      `json:"unavailable"`
	Upgrade        []string                 `json:"upgrade"`
	Reset          []string                 `json:"reset,omitempty"`
	InFlight       []string                 `json:"inFlight"`
	HeldBy         map[string][]string      `json:"heldBy"`
	NotUpgradable  []notUpgradablePod       `json:"notUpgradable"`
	Updated        []string                 `json:"updated"`
	Rounds         [][]string               `json:"rounds"`
	Warnings       []string                 `json:"warnings,omitempty"`
	// Events are those the controller records on the SidecarSet in this round.
	Events []planEvent `json:"events,omitempty"`
}

type planEvent struct {
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type notUpgradablePod struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// Keys of sidecarSetPlan.HeldBy, in the order text output lists them.
var heldByOrder = []string{"maxUnavailable", "partition", "updateStrategy.selector"}

// plan is the controller's next round (rollout.Decide, as the controller calls it over every pod)
// and forecast for ss over pods. revisionsHint says how to get the ControllerRevisions, for a pod
// whose changed fields only its revision would show.
func plan(ss *v1beta1.SidecarSet, pods []*corev1.Pod, revs []*appsv1.ControllerRevision, rounds int, revisionsHint string) (sidecarSetPlan, error) {
	a := rollout.Decide(ss, rollout.EveryPod(pods), rollout.History{Latest: ss.Status.LatestRevision, Revisions: revs})
	p := a.Plan
	out := sidecarSetPlan{
		SidecarSet:     ss.Name,
		LatestRevision: ss.Status.LatestRevision,
		Status:         a.Status,
		Stopped:        string(p.Stopped),
		Partition:      p.Partition,
		MaxUnavailable: p.MaxUnavailable,
		Unavailable:    p.Unavailable,
		Upgrade:        podKeys(a.Upgrade),
		Reset:          podKeys(a.Reset),
		InFlight:       podKeys(p.InFlight),
		HeldBy: map[string][]string{
			"maxUnavailable":          podKeys(p.HeldByMaxUnavailable),
			"partition":               podKeys(p.HeldByPartition),
			"updateStrategy.selector": podKeys(p.HeldBySelector),
		},
		NotUpgradable: []notUpgradablePod{},
		Updated:       podKeys(p.Updated),
		Rounds:        [][]string{},
		Warnings:      p.Warnings,
	}
	out.Status.CollisionCount = nil
	for _, e := range a.Events {
		out.Events = append(out.Events, planEvent{Type: e.Type, Reason: e.Reason, Message: e.Message})
	}
	for _, n := range p.NotUpgradable {
		out.NotUpgradable = append(out.NotUpgradable, notUpgradablePod{Pod: podKey(n.Pod), Reason: notUpgradableReason(n.Pod, ss, revs, revisionsHint)})
	}
	steps, err := rollout.Forecast(ss, pods, time.Now(), rounds)
	if err != nil {
		return out, err
	}
	for _, s := range steps {
		out.Rounds = append(out.Rounds, append(podKeys(s.Upgrade), podKeys(s.Reset)...))
	}
	return out, nil
}

// How to get the ControllerRevisions that name a pod's changed fields: offline, where they are kept
// when the cluster runs OpenKruise (sidecarops keeps them in its own namespace, or there when taking
// over an OpenKruise history); live, the right to list them.
const (
	offlineRevisionsHint = "give the ControllerRevisions (`kubectl get controllerrevisions -n kruise-system -o yaml`, or -n sidecarops-system) to see which field"
	liveRevisionsHint    = "the right to list ControllerRevisions (label " + v1beta1.SidecarSetNameLabel + ") would show which field"
)

// notUpgradableReason says why pod cannot be upgraded in place: the fields that changed since the
// pod's ControllerRevision; without that revision, the fields in which the SidecarSet's containers
// differ from those injected into the pod; when neither names one (a change outside the pod's
// containers, such as podInjectPolicy), the hashes and how to get the revisions.
func notUpgradableReason(pod *corev1.Pod, ss *v1beta1.SidecarSet, revs []*appsv1.ControllerRevision, revisionsHint string) string {
	reason := rollout.ExplainNotUpgradable(pod, ss, revs)
	if reason != rollout.NotUpgradableReason(pod, ss) {
		return reason // named from the revision
	}
	if fields := podChangedFields(pod, ss); len(fields) > 0 {
		return fmt.Sprintf("differs from the sidecars injected into the pod: %s (only images can change in place)", strings.Join(fields, ", "))
	}
	return reason + "; " + revisionsHint
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func podKeys(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, podKey(p))
	}
	return out
}

// filePlans plans every SidecarSet of the files (or the one named) over the pods of the files it
// manages: in its scope (selector, namespace, namespaceSelector against the Namespaces given) and
// injected by it. problems are what the input holds that a cluster would refuse, SidecarSets that
// are then not planned included.
func filePlans(cmd *cobra.Command, src *sourceFlags, args []string, rounds int) (plans []sidecarSetPlan, problems, err error) {
	w, err := src.input(cmd, "ignored")
	if err != nil {
		return nil, nil, err
	}
	nsLabels := map[string]map[string]string{}
	for _, ns := range w.Namespaces {
		nsLabels[ns.Name] = ns.Labels
	}
	var pods []*corev1.Pod
	for _, o := range w.Workloads {
		if p, ok := o.Obj.(*corev1.Pod); ok {
			if p.Namespace == "" {
				p.Namespace = src.namespace
			}
			pods = append(pods, p)
		}
	}
	for _, ss := range w.SidecarSets {
		if len(args) == 1 && ss.Name != args[0] {
			continue
		}
		scope, err := rollout.ScopeOf(ss)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", w.Origin[ss], err)
		}
		var managed []*corev1.Pod
		for _, p := range pods {
			labels := nsLabels[p.Namespace]
			if labels == nil {
				// A Namespace not given has at least the label the API server sets.
				labels = map[string]string{v1beta1.NamespaceNameLabel: p.Namespace}
			}
			if scope.Manages(ss, p, labels) {
				managed = append(managed, p)
			}
		}
		p, err := plan(ss, managed, w.Revisions, rounds, offlineRevisionsHint)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", w.Origin[ss], err)
		}
		plans = append(plans, p)
	}
	switch {
	case len(plans) > 0:
	case len(args) == 1 && !w.Refused[args[0]]:
		return nil, nil, errors.Join(w.Err(), fmt.Errorf("SidecarSet %q is not in the files given", args[0]))
	case w.SidecarSetsGiven == 0:
		return nil, nil, errors.Join(w.Err(), errors.New("no SidecarSet in the files given"))
	}
	return plans, w.Err(), nil
}

// livePlan reads the SidecarSet and the pods it manages from a cluster, as the controller lists
// them.
func livePlan(ctx context.Context, cluster clusterFlags, name string, rounds int) (sidecarSetPlan, error) {
	c, err := cluster.client()
	if err != nil {
		return sidecarSetPlan{}, err
	}
	ss := &v1beta1.SidecarSet{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, ss); err != nil {
		return sidecarSetPlan{}, fmt.Errorf("SidecarSet %s: %w", name, err)
	}
	// The stored object carries the defaulting webhook's work; defaulting again only fills what a
	// SidecarSet stored before the webhook existed lacks.
	if err := defaults.SidecarSetAndHash(ss); err != nil {
		return sidecarSetPlan{}, fmt.Errorf("SidecarSet %s: %w", name, err)
	}
	pods, err := managed.Pods(ctx, c, ss)
	if err != nil {
		return sidecarSetPlan{}, fmt.Errorf("SidecarSet %s: %w", name, err)
	}
	// The revisions live in the manager's namespace, which this side does not know: find them by
	// label. Without permission to list them, reasons name hashes instead of fields.
	var crs appsv1.ControllerRevisionList
	var revs []*appsv1.ControllerRevision
	if err := c.List(ctx, &crs, client.MatchingLabels{v1beta1.SidecarSetNameLabel: name}); err == nil {
		for i := range crs.Items {
			revs = append(revs, &crs.Items[i])
		}
	}
	return plan(ss, pods, revs, rounds, liveRevisionsHint)
}

func printPlans(out io.Writer, format string, plans []sidecarSetPlan) error {
	if format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(plans)
	}
	for i, p := range plans {
		if i > 0 {
			fmt.Fprintln(out)
		}
		st := p.Status
		fmt.Fprintf(out, "SidecarSet %s", p.SidecarSet)
		if p.LatestRevision != "" {
			fmt.Fprintf(out, " (latest revision %s)", p.LatestRevision)
		}
		fmt.Fprintf(out, ": matched %d, updated %d, ready %d, updated and ready %d\n", st.MatchedPods, st.UpdatedPods, st.ReadyPods, st.UpdatedReadyPods)
		fmt.Fprintf(out, "  partition %d, maxUnavailable %d (%d taken by updated pods not yet ready)\n", p.Partition, p.MaxUnavailable, p.Unavailable)
		if p.Stopped != "" {
			fmt.Fprintf(out, "  stopped: %s\n", p.Stopped)
		}
		for _, w := range p.Warnings {
			fmt.Fprintf(out, "  warning: %s\n", w)
		}
		for _, e := range p.Events {
			fmt.Fprintf(out, "  event %s: %s\n", e.Reason, e.Message)
		}
		list(out, "upgrade now", p.Upgrade)
		if len(p.Reset) > 0 {
			list(out, "reset to the empty image now (hot upgrade done)", p.Reset)
		}
		list(out, "in flight (the kubelet has not applied an earlier upgrade)", p.InFlight)
		for _, k := range heldByOrder {
			what := "held by " + k
			if k == "maxUnavailable" && p.Stopped != "" {
				what = "held while stopped" // candidates, none of which moves
			}
			list(out, what, p.HeldBy[k])
		}
		fmt.Fprintf(out, "  not upgradable (%d)\n", len(p.NotUpgradable))
		for _, n := range p.NotUpgradable {
			fmt.Fprintf(out, "    %s: %s\n", n.Pod, n.Reason)
		}
		list(out, "updated", p.Updated)
		fmt.Fprintln(out, "  next rounds (assuming the kubelet applies each change and pods stay ready):")
		if len(p.Rounds) == 0 {
			fmt.Fprintln(out, "    none")
		}
		for j, r := range p.Rounds {
			if len(r) == 0 {
				fmt.Fprintf(out, "    %d: nothing (upgrades in flight hold maxUnavailable)\n", j+1)
				continue
			}
			fmt.Fprintf(out, "    %d: %s\n", j+1, strings.Join(r, ", "))
		}
	}
	return nil
}

func list(out io.Writer, what string, pods []string) {
	fmt.Fprintf(out, "  %s (%d)", what, len(pods))
	if len(pods) > 0 {
		fmt.Fprintf(out, ": %s", strings.Join(pods, ", "))
	}
	fmt.Fprintln(out)
}
