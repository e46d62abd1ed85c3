package migrate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Path is one of docs/migration.md's two ways of switching.
type Path string

const (
	// PathA stops OpenKruise as a whole: nothing of it but SidecarSet is in use.
	PathA Path = "A"
	// PathB keeps OpenKruise for its other workloads, with its pod webhook off (feature gate
	// PodWebhook=false) and the fence refusing its SidecarSet controller's writes.
	PathB Path = "B"
)

// The bindings config/components/openkruise-fence (and the chart's openkruise.fence.enabled)
// installs: FenceBinding refuses OpenKruise's manager its SidecarSet controller's writes;
// FenceCRDBinding keeps the SidecarSet CRD's conversion as it was in that manager's updates.
const (
	FenceBinding    = "sidecarops-openkruise-fence"
	FenceCRDBinding = "sidecarops-openkruise-fence-crd"
)

// kruiseGroups are the API groups OpenKruise's manager serves. Kruise Rollout (rollouts.kruise.io),
// Kruise Game (game.kruise.io) and the like run managers of their own; what they build on
// OpenKruise's manager (CloneSets, Advanced StatefulSets) is counted here under apps.kruise.io.
var kruiseGroups = []string{"apps.kruise.io", "policy.kruise.io"}

// bookkeeping are the OpenKruise kinds its own manager and daemon create (a NodeImage per node, a
// NodePodProbe per node a PodProbeMarker's pods run on): they exist wherever OpenKruise runs and say
// nothing of what a user relies on.
var bookkeeping = []string{"nodeimages.apps.kruise.io", "nodepodprobes.apps.kruise.io"}

// Use counts the objects of one OpenKruise kind.
type Use struct {
	Group, Kind string
	Count       int
}

func (u Use) String() string { return fmt.Sprintf("%s.%s: %d", u.Kind, u.Group, u.Count) }

// webhookOnly is what OpenKruise does for objects of these kinds only in its pod webhook, which
// PodWebhook=false turns off (its pod mutating and validating handlers, pkg/webhook/pod): the
// controllers of these kinds keep running, but this part of what they promise goes.
var webhookOnly = map[schema.GroupKind]string{
	{Group: "policy.kruise.io", Kind: "PodUnavailableBudget"}: "no longer hold back pod deletions, evictions and in-place updates (PodUnavailableBudgetDeleteGate, PodUnavailableBudgetUpdateGate)",
	{Group: "apps.kruise.io", Kind: "WorkloadSpread"}:         "no longer spread new pods over their subsets nor patch them per subset (WorkloadSpread)",
	{Group: "apps.kruise.io", Kind: "PersistentPodState"}:     "no longer steer re-created pods back to the node or zone they had",
	{Group: "apps.kruise.io", Kind: "PodProbeMarker"}:         "no longer probe pods on serverless (virtual-kubelet) nodes (EnablePodProbeMarkerOnServerless; kruise-daemon probes pods on real nodes as before)",
}

// checkKinds counts the objects of every OpenKruise kind but SidecarSet: any in use and the
// cluster takes path B.
func (k *checker) checkKinds(ctx context.Context) error {
	crds := &unstructured.UnstructuredList{}
	crds.SetAPIVersion("apiextensions.k8s.io/v1")
	crds.SetKind("CustomResourceDefinitionList")
	if err := k.c.List(ctx, crds); err != nil {
		return fmt.Errorf("listing CustomResourceDefinitions: %w", err)
	}
	for _, crd := range crds.Items {
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		if !slices.Contains(kruiseGroups, group) || crd.GetName() == crdName || slices.Contains(bookkeeping, crd.GetName()) {
			continue
		}
		version := servedVersion(crd)
		if version == "" {
			continue // nothing can be read or written through it
		}
		// In the storage version where it is served: no conversion webhook is called.
		objs := &unstructured.UnstructuredList{}
		objs.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: kind + "List"})
		if err := k.c.List(ctx, objs); err != nil {
			return fmt.Errorf("counting OpenKruise's %s (%s/%s): %w", crd.GetName(), group, version, err)
		}
		if n := len(objs.Items); n > 0 {
			k.r.InUse = append(k.r.InUse, Use{Group: group, Kind: kind, Count: n})
		}
	}
	slices.SortFunc(k.r.InUse, func(a, b Use) int { return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Kind, b.Kind)) })
	k.r.Path = PathA
	if len(k.r.InUse) > 0 {
		k.r.Path = PathB
	}
	for _, u := range k.r.InUse {
		if lost, ok := webhookOnly[schema.GroupKind{Group: u.Group, Kind: u.Kind}]; ok {
			k.r.Losses = append(k.r.Losses, fmt.Sprintf("%d %s(s) %s", u.Count, u.Kind, lost))
		}
	}
	return nil
}

// servedVersion is the version to read a CRD's objects in: the storage version when it is served,
// else the first served one.
func servedVersion(crd unstructured.Unstructured) string {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	served := ""
	for _, v := range versions {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		if ok, _ := m["served"].(bool); !ok {
			continue
		}
		if ok, _ := m["storage"].(bool); ok {
			return name
		}
		served = cmp.Or(served, name)
	}
	return served
}

// checkFence looks, on path B, for the fence's two bindings and the policies they bind; k.unfenced
// says what is missing. An API server that serves no MutatingAdmissionPolicy (before Kubernetes
// 1.36) cannot hold the fence's CRD part, and so cannot take path B (docs/decisions.md D10).
func (k *checker) checkFence(ctx context.Context) error {
	if k.r.Path != PathB {
		return nil
	}
	var vb admissionregv1.ValidatingAdmissionPolicyBinding
	var vp admissionregv1.ValidatingAdmissionPolicy
	missing, err := k.fencePart(ctx, "ValidatingAdmissionPolicy", FenceBinding, &vb, &vp, func() string { return vb.Spec.PolicyName })
	switch {
	case errors.Is(err, errNotServed):
		missing = "the API server serves no ValidatingAdmissionPolicy"
	case err != nil:
		return err
	case missing == "" && !slices.Contains(vb.Spec.ValidationActions, admissionregv1.Deny):
		missing = fmt.Sprintf("ValidatingAdmissionPolicyBinding %s does not deny (validationActions %v)", FenceBinding, vb.Spec.ValidationActions)
	}
	if missing != "" {
		k.unfenced = append(k.unfenced, missing)
	} else {
		k.fenced = append(k.fenced, matchExpressions(vp.Spec.MatchConditions))
	}
	var mb admissionregv1.MutatingAdmissionPolicyBinding
	var mp admissionregv1.MutatingAdmissionPolicy
	missing, err = k.fencePart(ctx, "MutatingAdmissionPolicy", FenceCRDBinding, &mb, &mp, func() string { return mb.Spec.PolicyName })
	switch {
	case errors.Is(err, errNotServed):
		k.r.Findings = append(k.r.Findings, Finding{
			Blocker: true,
			Message: "the API server serves no MutatingAdmissionPolicy (Kubernetes 1.36 or later does), so the fence cannot keep OpenKruise's manager from pointing the SidecarSet CRD's conversion back at its own Service, within a minute of every fix (docs/decisions.md D10)",
			Fix:     "keep OpenKruise's SidecarSet until the control plane runs Kubernetes 1.36 or later; sidecarctl checks SidecarSets offline meanwhile",
		})
	case err != nil:
		return err
	case missing != "":
		k.unfenced = append(k.unfenced, missing)
	default:
		k.fenced = append(k.fenced, matchExpressions(mp.Spec.MatchConditions))
	}
	if len(k.unfenced) == 0 && err == nil {
		k.r.Found = append(k.r.Found, fmt.Sprintf("the fence: ValidatingAdmissionPolicyBinding %s, MutatingAdmissionPolicyBinding %s", FenceBinding, FenceCRDBinding))
	}
	return nil
}

// matchExpressions are the CEL expressions of a policy's match conditions, where the fence names the
// user it fences.
func matchExpressions(conditions []admissionregv1.MatchCondition) []string {
	out := make([]string, len(conditions))
	for i, c := range conditions {
		out[i] = c.Expression
	}
	return out
}

// errNotServed says the API server does not serve a kind.
var errNotServed = errors.New("not served")

// fencePart reads binding name into binding, then the policy it names (policyName, once binding is
// read) into policy, and says what is missing, if anything; errNotServed if the API server serves
// no such binding.
func (k *checker) fencePart(ctx context.Context, kind, name string, binding, policy client.Object, policyName func() string) (string, error) {
	if err := k.c.Get(ctx, client.ObjectKey{Name: name}, binding); err != nil {
		switch {
		case apimeta.IsNoMatchError(err):
			return "", errNotServed
		case apierrors.IsNotFound(err):
			return fmt.Sprintf("no %sBinding %s", kind, name), nil
		}
		return "", fmt.Errorf("reading %sBinding %s: %w", kind, name, err)
	}
	if err := k.c.Get(ctx, client.ObjectKey{Name: policyName()}, policy); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("%sBinding %s binds %s %s, which is missing", kind, name, kind, policyName()), nil
		}
		return "", fmt.Errorf("reading %s %s: %w", kind, policyName(), err)
	}
	return "", nil
}

// podLosses counts the pods that rely on what OpenKruise's pod webhook does at their creation: pods
// created with it off no longer get it.
func podLosses(pods []corev1.Pod) []string {
	var gated, liveness, ordered int
	for i := range pods {
		p := &pods[i]
		if slices.ContainsFunc(p.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == kruisePodReady }) {
			gated++
		}
		if p.Annotations[enhancedLiveness] == "true" {
			liveness++
		}
		if p.Annotations[launchPriority] != "" || slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool {
			return slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == launchPriorityEnv })
		}) {
			ordered++
		}
	}
	var out []string
	if gated > 0 {
		out = append(out, fmt.Sprintf("%d pod(s) carry the readiness gate %s: new pods no longer get it, so OpenKruise no longer takes them out of their Services before an in-place update, a container recreate or a lifecycle hook (KruisePodReadinessGate)", gated, kruisePodReady))
	}
	if liveness > 0 {
		out = append(out, fmt.Sprintf("%d pod(s) use the enhanced liveness probe (%s): new ones keep their liveness probe with the kubelet (EnhancedLivenessProbe)", liveness, enhancedLiveness))
	}
	if ordered > 0 {
		out = append(out, fmt.Sprintf("%d pod(s) start their containers in an order (%s or env %s): new ones start them all at once", ordered, launchPriority, launchPriorityEnv))
	}
	return out
}

// What OpenKruise's pod webhook reads and writes on pods.
const kruisePodReady corev1.PodConditionType = "KruisePodReady"

const (
	enhancedLiveness  = "apps.kruise.io/using-enhanced-liveness"
	launchPriority    = "apps.kruise.io/container-launch-priority"
	launchPriorityEnv = "KRUISE_CONTAINER_PRIORITY"
)
