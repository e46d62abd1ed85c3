package rollout

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/sidecarset/defaults"
	"github.com/sidecarops/sidecarops/internal/sidecarset/history"
)

// ExplainNotUpgradable says why pod cannot be upgraded in place by ss, naming the fields that
// changed when it can: the pod's hash annotation records the ControllerRevision its sidecars came
// from, and comparing that revision's containers with ss's (images aside) gives the fields. Without
// the revision (an old pod, or one truncated from history) it falls back to NotUpgradableReason.
// It returns "" when the pod is upgradable.
func ExplainNotUpgradable(pod *corev1.Pod, ss *v1beta1.SidecarSet, revs []*appsv1.ControllerRevision) string {
	reason := NotUpgradableReason(pod, ss)
	if reason == "" {
		return ""
	}
	name := PodControllerRevision(pod, ssName(ss))
	for _, cr := range revs {
		if cr == nil || cr.Name != name {
			continue
		}
		old, err := history.Restore(ss, cr)
		if err != nil {
			return reason
		}
		if fields := ChangedFields(old, ss); len(fields) > 0 {
			return fmt.Sprintf("changed since revision %s, which the pod runs: %s (only images can change in place)", name, strings.Join(fields, ", "))
		}
	}
	return reason
}

// ChangedFields lists the paths of ss's spec.containers that differ from old's other than by
// image: whole containers added or removed, or their top-level fields.
func ChangedFields(old, ss *v1beta1.SidecarSet) []string {
	var out []string
	before := map[string]map[string]any{}
	for _, c := range old.Spec.Containers {
		before[c.Name] = withoutImage(c)
	}
	seen := map[string]bool{}
	for i, c := range ss.Spec.Containers {
		seen[c.Name] = true
		prev, ok := before[c.Name]
		if !ok {
			out = append(out, fmt.Sprintf("spec.containers[%d] (%s) added", i, c.Name))
			continue
		}
		now := withoutImage(c)
		for _, k := range slices.Sorted(maps.Keys(union(prev, now))) {
			if !reflect.DeepEqual(prev[k], now[k]) {
				out = append(out, fmt.Sprintf("spec.containers[%d].%s", i, k))
			}
		}
	}
	for _, c := range old.Spec.Containers {
		if !seen[c.Name] {
			out = append(out, fmt.Sprintf("spec.containers (%s) removed", c.Name))
		}
	}
	return out
}

// withoutImage is a sidecar container as generic JSON with its image left out.
func withoutImage(c v1beta1.SidecarContainer) map[string]any {
	c.Image = ""
	return asMap(c)
}

func union(a, b map[string]any) map[string]any {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// PodChangedFields lists the fields of ss's spec.containers that differ, other than by image, from
// the containers injected into pod: what ChangedFields tells from a ControllerRevision, told from the
// pod itself when the revision is not at hand. Injection adds to a sidecar's env and volumeMounts
// (transferEnv, shared volumes) and resourcesPolicy computes its resources, so those are compared
// only as far as the SidecarSet defines them: an env var or mount the SidecarSet dropped is not
// seen. Both sides are defaulted alike first, so a field the API server filled in is no change.
func PodChangedFields(pod *corev1.Pod, ss *v1beta1.SidecarSet) []string {
	inPod := map[string]corev1.Container{}
	for _, c := range pod.Spec.Containers {
		inPod[c.Name] = c
	}
	working := WorkingHotUpgradeContainers(pod)
	var out []string
	for i, c := range ss.Spec.Containers {
		name := c.Name
		if isHot(&c) {
			name = working[c.Name]
			if name == "" {
				name, _ = HotUpgradeNames(c.Name)
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
		prev, now := asMap(have), asMap(want)
		for k := range union(prev, now) {
			if !reflect.DeepEqual(prev[k], now[k]) {
				changed = append(changed, k)
			}
		}
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

// asMap is a container as generic JSON.
func asMap(c any) map[string]any {
	b, err := json.Marshal(c)
	if err != nil {
		return map[string]any{"<unencodable>": err.Error()}
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		return map[string]any{"<undecodable>": err.Error()}
	}
	return m
}
