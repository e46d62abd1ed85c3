package migrate

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/podwebhook"
)

// What OpenKruise's pod webhook reads and writes on pods.
const kruisePodReady corev1.PodConditionType = "KruisePodReady"

const (
	enhancedLiveness  = "apps.kruise.io/using-enhanced-liveness"
	launchPriority    = "apps.kruise.io/container-launch-priority"
	launchPriorityEnv = "KRUISE_CONTAINER_PRIORITY"
)

// podCounts is what the pass over the pods found.
type podCounts struct {
	// injected carry sidecarops' (and OpenKruise's) injected-list annotation.
	injected int
	// gated, liveness and ordered rely on OpenKruise's pod webhook (podFeatures).
	gated, liveness, ordered int
	// unseen are the pods OpenKruise injected from a SidecarSet that is still there, which
	// sidecarops' pod webhook will not see, by namespace and requirement.
	unseen map[unseenKey]int
}

type unseenKey struct {
	namespace   string
	reason      podwebhook.Reason
	requirement string
}

// features are the uses of OpenKruise's pod webhook the pods show.
func (p podCounts) features() []Feature {
	var out []Feature
	if p.ordered > 0 {
		out = append(out, Feature{Count: p.ordered, What: fmt.Sprintf("pod(s) with a container launch order (%s or env %s)", launchPriority, launchPriorityEnv),
			Does: "their containers started one priority after another (the barrier env KRUISE_CONTAINER_BARRIER)"})
	}
	if p.gated > 0 {
		out = append(out, Feature{Count: p.gated, What: fmt.Sprintf("pod(s) with the readiness gate %s", kruisePodReady),
			Does: "taken out of their Services before an in-place update, a container recreate or a lifecycle hook (KruisePodReadinessGate)"})
	}
	if p.liveness > 0 {
		out = append(out, Feature{Count: p.liveness, What: fmt.Sprintf("pod(s) with the enhanced liveness probe (%s)", enhancedLiveness),
			Does: "their liveness probe run by OpenKruise instead of the kubelet (EnhancedLivenessProbe)"})
	}
	return out
}

// checkPods reads the pods a page at a time (a cluster's pods need not fit in memory at once) and
// counts what the report says of them.
func (k *checker) checkPods(ctx context.Context) error {
	var nss corev1.NamespaceList
	if err := k.c.List(ctx, &nss); err != nil {
		return fmt.Errorf("listing Namespaces: %w", err)
	}
	nsLabels := make(map[string]map[string]string, len(nss.Items))
	for _, ns := range nss.Items {
		nsLabels[ns.Name] = ns.Labels
	}
	sets := map[string]bool{}
	for _, ss := range k.sets {
		sets[ss.Name] = true
	}
	k.pods.unseen = map[unseenKey]int{}
	var pods corev1.PodList
	for {
		if err := k.c.List(ctx, &pods, client.Limit(k.o.PageSize), client.Continue(pods.Continue)); err != nil {
			return fmt.Errorf("listing pods: %w", err)
		}
		for i := range pods.Items {
			k.countPod(&pods.Items[i], nsLabels, sets)
		}
		if pods.Continue == "" {
			return nil
		}
	}
}

func (k *checker) countPod(p *corev1.Pod, nsLabels map[string]map[string]string, sets map[string]bool) {
	c := &k.pods
	if p.Annotations[v1beta1.SidecarSetListAnnotation] != "" {
		c.injected++
	}
	if slices.ContainsFunc(p.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == kruisePodReady }) {
		c.gated++
	}
	if p.Annotations[enhancedLiveness] == "true" {
		c.liveness++
	}
	if p.Annotations[launchPriority] != "" || slices.ContainsFunc(p.Spec.Containers, func(ctr corev1.Container) bool {
		return slices.ContainsFunc(ctr.Env, func(e corev1.EnvVar) bool { return e.Name == launchPriorityEnv })
	}) {
		c.ordered++
	}
	if k.view == nil || !injectedFrom(p, sets) {
		return
	}
	e := k.view.NamespaceExcluded(p.Namespace, nsLabels[p.Namespace])
	if e == nil {
		e = k.view.ObjectExcluded(p.Labels)
	}
	if e != nil {
		c.unseen[unseenKey{p.Namespace, e.Reason, e.Requirement.String()}]++
	}
}

// injectedFrom says whether OpenKruise (or sidecarops) injected p from a SidecarSet still in sets:
// its hash annotation names the SidecarSets it injected. A SidecarSet since deleted injects nothing
// more, whoever sees the pod.
func injectedFrom(p *corev1.Pod, sets map[string]bool) bool {
	raw := p.Annotations[v1beta1.SidecarSetHashAnnotation]
	if raw == "" {
		return false
	}
	var hashes map[string]json.RawMessage
	if json.Unmarshal([]byte(raw), &hashes) != nil {
		return true // unreadable: OpenKruise's all the same
	}
	for name := range hashes {
		if sets[name] {
			return true
		}
	}
	return false
}

// checkUnseen warns, per namespace, of the pods OpenKruise injected that sidecarops' pod webhook will
// not see: on path A their new pods are created without sidecars; on path B OpenKruise's pod webhook
// goes on injecting them alone, outside sidecarops' gates, whitelist and collision rules.
func (k *checker) checkUnseen(context.Context) error {
	keys := make([]unseenKey, 0, len(k.pods.unseen))
	for key := range k.pods.unseen {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b unseenKey) int {
		return cmp.Or(strings.Compare(a.namespace, b.namespace), cmp.Compare(a.reason, b.reason), strings.Compare(a.requirement, b.requirement))
	})
	then := "OpenKruise's pod webhook goes on injecting their new pods alone, outside sidecarops' gates, whitelist and collision rules"
	if k.r.Path == PathA {
		then = "once OpenKruise is stopped their new pods are created without sidecars"
	}
	for _, key := range keys {
		e := k.exclusion(key)
		k.r.Findings = append(k.r.Findings, Finding{
			Message: fmt.Sprintf("%d pod(s) in namespace %s were injected by OpenKruise (%s) and sidecarops' pod webhook, %s, will not see them: %s; %s",
				k.pods.unseen[key], key.namespace, v1beta1.SidecarSetHashAnnotation, k.viewSource, e.Why(key.namespace), then),
			Fix: k.unseenFix(key.namespace, e),
		})
	}
	return nil
}

// exclusion finds the requirement of the view that key names.
func (k *checker) exclusion(key unseenKey) podwebhook.Exclusion {
	for _, e := range k.view.Exclusions() {
		if e.Reason == key.reason && e.Requirement.String() == key.requirement {
			return e
		}
	}
	return podwebhook.Exclusion{Reason: key.reason}
}

// unseenFix is the value or command that lets sidecarops' pod webhook see namespace ns's pods.
func (k *checker) unseenFix(ns string, e podwebhook.Exclusion) string {
	upgrade := "helm upgrade sidecarops CHART -n " + k.o.Namespace + " --reuse-values "
	switch e.Reason {
	case podwebhook.ExcludedByName:
		if ns == k.o.Namespace {
			return "move these workloads out of " + ns + ": sidecarops' pod webhook never sees its own namespace, so that the manager starts when no replica answers"
		}
		rest := []string{}
		for _, v := range e.Requirement.ValuesUnsorted() {
			if v != ns && v != k.o.Namespace {
				rest = append(rest, v)
			}
		}
		slices.Sort(rest)
		list, _ := json.Marshal(rest)
		return fmt.Sprintf("%s--set-json 'webhookConfiguration.excludedNamespaces=%s'   # %s taken out; with config/webhook, take it out of webhook %s's namespaceSelector", upgrade, list, ns, podwebhook.WebhookName)
	case podwebhook.ManagersOwn:
		return fmt.Sprintf("kubectl label namespace %s %s-   # the label marks sidecarops' own namespace", ns, podwebhook.ControlPlaneLabel)
	case podwebhook.ControlPlane:
		return fmt.Sprintf("kubectl label namespace %s %s-   # OpenKruise's pod webhook leaves such namespaces out too: the label came after their pods", ns, podwebhook.KruiseControlPlaneLabel)
	case podwebhook.OtherNamespaceRequirement:
		return fmt.Sprintf("label namespace %s to match %s, or widen webhookConfiguration.namespaceSelector: %s--set-json 'webhookConfiguration.namespaceSelector={}'", ns, e.Requirement.String(), upgrade)
	}
	return fmt.Sprintf("label the pods' templates to match %s, or widen webhookConfiguration.objectSelector: %s--set-json 'webhookConfiguration.objectSelector={}'", e.Requirement.String(), upgrade)
}
