package rolloutplan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/controller/managed"
	"github.com/sidecarops/sidecarops/controller/rollout"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/workspace"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

// Plan is what `rollout plan` reports for one SidecarSet; pods are namespace/name.
type Plan struct {
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
	NotUpgradable  []NotUpgradablePod       `json:"notUpgradable"`
	Updated        []string                 `json:"updated"`
	Rounds         [][]string               `json:"rounds"`
	Warnings       []string                 `json:"warnings,omitempty"`
	// Events are those the controller records on the SidecarSet in this round.
	Events []Event `json:"events,omitempty"`
}

// Event is an Event the controller records on the SidecarSet in the round.
type Event struct {
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// NotUpgradablePod is a pod that cannot be upgraded in place, and why.
type NotUpgradablePod struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// Keys of Plan.HeldBy, in the order text output lists them.
var heldByOrder = []string{"maxUnavailable", "partition", "updateStrategy.selector"}

// Of is the controller's next round (rollout.Decide, as the controller calls it over every pod)
// and forecast for ss over pods. revisionsHint says how to get the ControllerRevisions, for a pod
// whose changed fields only its revision would show.
func Of(ss *v1beta1.SidecarSet, pods []*corev1.Pod, revs []*appsv1.ControllerRevision, rounds int, revisionsHint string) (Plan, error) {
	a := rollout.Decide(ss, rollout.EveryPod(pods), rollout.History{Latest: ss.Status.LatestRevision, Revisions: func() []*appsv1.ControllerRevision { return revs }})
	p := a.Plan
	out := Plan{
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
		NotUpgradable: []NotUpgradablePod{},
		Updated:       podKeys(p.Updated),
		Rounds:        [][]string{},
		Warnings:      p.Warnings,
	}
	out.Status.CollisionCount = nil
	for _, e := range a.Events {
		out.Events = append(out.Events, Event{Type: e.Type, Reason: e.Reason, Message: e.Message})
	}
	for _, n := range p.NotUpgradable {
		out.NotUpgradable = append(out.NotUpgradable, NotUpgradablePod{Pod: podKey(n.Pod), Reason: notUpgradableReason(n.Pod, ss, revs, revisionsHint)})
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
	OfflineRevisionsHint = "give the ControllerRevisions (`kubectl get controllerrevisions -n kruise-system -o yaml`, or -n sidecarops-system) to see which field"
	LiveRevisionsHint    = "the right to list ControllerRevisions (label " + v1beta1.SidecarSetNameLabel + ") would show which field"
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

// FromWorkspace plans every SidecarSet of w (or only the one named so, unless only is "") over the
// pods of w it manages: in its scope (selector, namespace, namespaceSelector against the Namespaces
// given) and injected by it; a pod without a namespace is in namespace. problems are what the input
// holds that a cluster would refuse, SidecarSets that are then not planned included.
func FromWorkspace(w *workspace.Workspace, namespace, only string, rounds int) (plans []Plan, problems, err error) {
	nsLabels := map[string]map[string]string{}
	for _, ns := range w.Namespaces {
		nsLabels[ns.Name] = ns.Labels
	}
	var pods []*corev1.Pod
	for _, o := range w.Workloads {
		if p, ok := o.Obj.(*corev1.Pod); ok {
			if p.Namespace == "" {
				p.Namespace = namespace
			}
			pods = append(pods, p)
		}
	}
	for _, ss := range w.SidecarSets {
		if only != "" && ss.Name != only {
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
		p, err := Of(ss, managed, w.Revisions, rounds, OfflineRevisionsHint)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", w.Origin[ss], err)
		}
		plans = append(plans, p)
	}
	switch {
	case len(plans) > 0:
	case only != "" && !w.Refused[only]:
		return nil, nil, errors.Join(w.Err(), fmt.Errorf("SidecarSet %q is not in the files given", only))
	case w.SidecarSetsGiven == 0:
		return nil, nil, errors.Join(w.Err(), errors.New("no SidecarSet in the files given"))
	}
	return plans, w.Err(), nil
}

// Live reads the SidecarSet named name and the pods it manages through c, as the controller lists
// them, and plans it.
func Live(ctx context.Context, c client.Reader, name string, rounds int) (Plan, error) {
	ss := &v1beta1.SidecarSet{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, ss); err != nil {
		return Plan{}, fmt.Errorf("SidecarSet %s: %w", name, err)
	}
	// The stored object carries the defaulting webhook's work; defaulting again only fills what a
	// SidecarSet stored before the webhook existed lacks.
	if err := defaults.SidecarSetAndHash(ss); err != nil {
		return Plan{}, fmt.Errorf("SidecarSet %s: %w", name, err)
	}
	pods, err := managed.Pods(ctx, c, ss)
	if err != nil {
		return Plan{}, fmt.Errorf("SidecarSet %s: %w", name, err)
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
	return Of(ss, pods, revs, rounds, LiveRevisionsHint)
}

// Print writes plans to out as format says: "json", an indented array, or the text report.
func Print(out io.Writer, format string, plans []Plan) error {
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

// podChangedFields lists the fields of ss's spec.containers that differ, other than by image, from
// the containers injected into pod: what rollout.ChangedFields tells from a ControllerRevision, told
// from the pod itself when the revision is not at hand. Injection adds to a sidecar's env and
// volumeMounts (transferEnv, shared volumes) and resourcesPolicy computes its resources, so those
// are compared only as far as the SidecarSet defines them: an env var or mount the SidecarSet
// dropped is not seen. Both sides are defaulted alike first, so a field the API server filled in is
// no change. It lives here, not in controller/rollout, because it reads pods whole: the controller's
// pod cache keeps only what rollout reads (controller.TestPodCacheKeepsWhatRolloutReads).
func podChangedFields(pod *corev1.Pod, ss *v1beta1.SidecarSet) []string {
	inPod := map[string]corev1.Container{}
	for _, c := range pod.Spec.Containers {
		inPod[c.Name] = c
	}
	working := rollout.WorkingHotUpgradeContainers(pod)
	var out []string
	for i, c := range ss.Spec.Containers {
		name := c.Name
		if c.UpgradeStrategy.UpgradeType == v1beta1.SidecarContainerHotUpgrade {
			name = working[c.Name]
			if name == "" {
				name, _ = rollout.HotUpgradeNames(c.Name)
			}
		}
		injected, ok := inPod[name]
		if !ok {
			out = append(out, fmt.Sprintf("spec.containers[%d] (%s) added", i, c.Name))
			continue
		}
		want, have := c.Container, injected
		defaults.Container(&want)
		defaults.Container(&have)
		var changed []string
		if !containsAll(have.Env, want.Env) {
			changed = append(changed, "env")
		}
		if !containsAll(have.VolumeMounts, want.VolumeMounts) {
			changed = append(changed, "volumeMounts")
		}
		want.Image, have.Image = "", ""
		want.Env, have.Env = nil, nil
		want.VolumeMounts, have.VolumeMounts = nil, nil
		if c.ResourcesPolicy != nil {
			want.Resources, have.Resources = corev1.ResourceRequirements{}, corev1.ResourceRequirements{}
		}
		want.Name = have.Name // a hot upgrade twin is named NAME-1 or NAME-2
		changed = append(changed, rollout.DifferingKeys(have, want)...)
		slices.Sort(changed)
		for _, k := range changed {
			out = append(out, fmt.Sprintf("spec.containers[%d].%s", i, k))
		}
	}
	return out
}

// containsAll reports whether every element of the slice want is in the slice have.
func containsAll[T any](have, want []T) bool {
	for _, w := range want {
		if !slices.ContainsFunc(have, func(h T) bool { return reflect.DeepEqual(h, w) }) {
			return false
		}
	}
	return true
}
