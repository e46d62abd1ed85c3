package migrate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Path is one of docs/migration.md's two ways of switching.
type Path string

const (
	// PathA stops OpenKruise as a whole: nothing of it but SidecarSet is in use.
	PathA Path = "A"
	// PathB keeps OpenKruise for its other workloads and its pod webhook, sidecarops' pod webhook
	// after it (--openkruise-kept), and the fence refusing OpenKruise's SidecarSet controller's writes.
	PathB Path = "B"
)

// FenceBinding is the binding config/components/openkruise-fence (and the chart's
// openkruise.fence.enabled) installs: it refuses OpenKruise's manager its SidecarSet controller's
// writes.
const FenceBinding = "sidecarops-openkruise-fence"

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

// webhookOnly is what OpenKruise does for objects of these kinds only in its pod webhook (its pod
// mutating and validating handlers, pkg/webhook/pod), which PodWebhook=false turns off: the
// controllers of these kinds run either way.
var webhookOnly = map[schema.GroupKind]string{
	{Group: "policy.kruise.io", Kind: "PodUnavailableBudget"}: "pod deletions, evictions and in-place updates held back (PodUnavailableBudgetDeleteGate, PodUnavailableBudgetUpdateGate)",
	{Group: "apps.kruise.io", Kind: "WorkloadSpread"}:         "new pods spread over their subsets and patched per subset (WorkloadSpread)",
	{Group: "apps.kruise.io", Kind: "PersistentPodState"}:     "re-created pods steered back to the node or zone they had",
	{Group: "apps.kruise.io", Kind: "PodProbeMarker"}:         "pods on serverless (virtual-kubelet) nodes probed (EnablePodProbeMarkerOnServerless; kruise-daemon probes pods on real nodes either way)",
}

// Feature is one use of what OpenKruise's pod webhook does: Count objects of a kind or pods, and
// what it does for them.
type Feature struct {
	Count int
	// What they are ("PodUnavailableBudget(s)"), and what the pod webhook does for them.
	What, Does string
}

func (f Feature) String() string { return fmt.Sprintf("%d %s: %s", f.Count, f.What, f.Does) }

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
		n, err := k.count(ctx, schema.GroupVersionKind{Group: group, Version: version, Kind: kind + "List"})
		if err != nil {
			return fmt.Errorf("counting OpenKruise's %s (%s/%s): %w", crd.GetName(), group, version, err)
		}
		if n > 0 {
			k.r.InUse = append(k.r.InUse, Use{Group: group, Kind: kind, Count: n})
		}
	}
	slices.SortFunc(k.r.InUse, func(a, b Use) int { return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Kind, b.Kind)) })
	return nil
}

// count counts the objects of a list kind, their metadata alone and a page at a time: a
// cluster's CloneSets or Advanced StatefulSets need not be read whole to be counted.
func (k *checker) count(ctx context.Context, list schema.GroupVersionKind) (int, error) {
	objs := &metav1.PartialObjectMetadataList{}
	objs.SetGroupVersionKind(list)
	n := 0
	for {
		if err := k.c.List(ctx, objs, client.Limit(k.o.PageSize), client.Continue(objs.Continue)); err != nil {
			return 0, err
		}
		n += len(objs.Items)
		if objs.Continue == "" {
			return n, nil
		}
	}
}

// decidePath takes path B where OpenKruise's other kinds are in use, or where pods rely on what its
// pod webhook does for them: path A would take that away with OpenKruise, and sidecarops does none of
// it. Path A only where nothing is lost.
func (k *checker) decidePath(context.Context) error {
	r := &k.r
	for _, u := range r.InUse {
		if does, ok := webhookOnly[schema.GroupKind{Group: u.Group, Kind: u.Kind}]; ok {
			r.Features = append(r.Features, Feature{Count: u.Count, What: u.Kind + "(s)", Does: does})
		}
	}
	r.Features = append(r.Features, k.pods.features()...)
	r.Path = PathA
	if len(r.InUse) > 0 || len(r.Features) > 0 {
		r.Path = PathB
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

// checkFence looks, on path B, for the fence's binding and the policy it binds; k.unfenced says
// what is missing.
func (k *checker) checkFence(ctx context.Context) error {
	if k.r.Path != PathB {
		return nil
	}
	var vb admissionregv1.ValidatingAdmissionPolicyBinding
	var vp admissionregv1.ValidatingAdmissionPolicy
	missing, err := k.fencePart(ctx, &vb, &vp)
	switch {
	case errors.Is(err, errNotServed):
		missing = "the API server serves no ValidatingAdmissionPolicy (Kubernetes 1.30 or later does)"
	case err != nil:
		return err
	case missing == "" && !slices.Contains(vb.Spec.ValidationActions, admissionregv1.Deny):
		missing = fmt.Sprintf("ValidatingAdmissionPolicyBinding %s does not deny (validationActions %v)", FenceBinding, vb.Spec.ValidationActions)
	}
	if missing != "" {
		k.unfenced = append(k.unfenced, missing)
		return nil
	}
	for _, c := range vp.Spec.MatchConditions {
		k.fenced = append(k.fenced, c.Expression)
	}
	k.r.Found = append(k.r.Found, "the fence: ValidatingAdmissionPolicyBinding "+FenceBinding)
	return nil
}

// errNotServed says the API server does not serve a kind.
var errNotServed = errors.New("not served")

// fencePart reads the fence's binding into binding, then the policy it names into policy, and says
// what is missing, if anything; errNotServed if the API server serves no such binding.
func (k *checker) fencePart(ctx context.Context, binding *admissionregv1.ValidatingAdmissionPolicyBinding, policy *admissionregv1.ValidatingAdmissionPolicy) (string, error) {
	const kind = "ValidatingAdmissionPolicy"
	if err := k.c.Get(ctx, client.ObjectKey{Name: FenceBinding}, binding); err != nil {
		switch {
		case apimeta.IsNoMatchError(err):
			return "", errNotServed
		case apierrors.IsNotFound(err):
			return fmt.Sprintf("no %sBinding %s", kind, FenceBinding), nil
		}
		return "", fmt.Errorf("reading %sBinding %s: %w", kind, FenceBinding, err)
	}
	name := binding.Spec.PolicyName
	if err := k.c.Get(ctx, client.ObjectKey{Name: name}, policy); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("%sBinding %s binds %s %s, which is missing", kind, FenceBinding, kind, name), nil
		}
		return "", fmt.Errorf("reading %s %s: %w", kind, name, err)
	}
	return "", nil
}
