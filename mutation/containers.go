package mutation

import (
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// placed is a fully built sidecar container waiting to be merged into the pod, with the policy
// that decides its side of the app containers.
type placed struct {
	container *corev1.Container // built for this pod, or prepared and shared (read-only)
	policy    v1beta1.PodInjectPolicyType
}

// mergeContainers is OpenKruise's mergeSidecarContainers (compat §1.13), for containers and init
// containers alike, as a plan against the pod's list: a sidecar whose name is already in the pod
// replaces that container where it stands; the others go in front (BeforeAppContainer) or behind
// (AfterAppContainer, and anything else, since an undefaulted policy behaves as After). The patch is
// built from the plan, and the merged list, when wanted, is the plan applied (listGrowth.apply).
//
// The name index is built once from the pod's own list, last index winning, exactly as OpenKruise's
// map does; two sidecars with the same name therefore both replace the same pod container (the last
// one stays), or are both added.
func mergeContainers(pod []corev1.Container, sidecars []placed) listGrowth[corev1.Container] {
	g := listGrowth[corev1.Container]{origLen: len(pod)}
	if len(sidecars) == 0 {
		return g
	}
	index := make(map[string]int, len(pod))
	for i := range pod {
		index[pod[i].Name] = i
	}
	// One list holds the front, then the back, in sidecar order.
	front := 0
	for _, s := range sidecars {
		if _, ok := index[s.container.Name]; !ok && s.policy == v1beta1.BeforeAppContainerType {
			front++
		}
	}
	added := make([]*corev1.Container, front, len(sidecars))
	var replacedBy []*corev1.Container // the last sidecar of each pod container's name
	next := 0
	for _, s := range sidecars {
		switch i, ok := index[s.container.Name]; {
		case ok:
			if replacedBy == nil {
				replacedBy = make([]*corev1.Container, len(pod))
			}
			replacedBy[i] = s.container
		case s.policy == v1beta1.BeforeAppContainerType:
			added[next] = s.container
			next++
		default:
			added = append(added, s.container)
		}
	}
	g.front, g.back = added[:front:front], added[front:]
	for i, s := range replacedBy {
		// A sidecar identical to the container it replaces is no change: re-injecting an injected
		// pod must give an empty patch. reflect.DeepEqual, not semantic equality, because a
		// semantically equal Quantity can still serialise differently.
		if s != nil && !reflect.DeepEqual(*s, pod[i]) {
			g.replaced = append(g.replaced, indexed[corev1.Container]{index: i, value: s})
		}
	}
	return g
}

// sortByName orders injected init containers by name, stably, before they are merged: OpenKruise
// does this (compat §1.12 step 9, W32–W34), so users relying on name order across SidecarSets keep it.
func sortByName(sidecars []placed) {
	slices.SortStableFunc(sidecars, func(a, b placed) int { return strings.Compare(a.container.Name, b.container.Name) })
}

func isNativeSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func isHotUpgrade(c *v1beta1.SidecarContainer) bool {
	return c.UpgradeStrategy.UpgradeType == v1beta1.SidecarContainerHotUpgrade
}

// IsInjected recognises sidecars already in the pod. OpenKruise knows them only by this env var
// (first occurrence, exact value "true"), so that is what decides it here too.
func IsInjected(c *corev1.Container) bool {
	e := firstEnv(c, v1beta1.SidecarEnvInjected)
	return e != nil && e.Value == "true"
}
