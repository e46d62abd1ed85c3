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
	"github.com/sidecarops/sidecarops/sidecarset/history"
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
	before := map[string]v1beta1.SidecarContainer{}
	for _, c := range old.Spec.Containers {
		c.Image = ""
		before[c.Name] = c
	}
	seen := map[string]bool{}
	for i, c := range ss.Spec.Containers {
		seen[c.Name] = true
		prev, ok := before[c.Name]
		if !ok {
			out = append(out, fmt.Sprintf("spec.containers[%d] (%s) added", i, c.Name))
			continue
		}
		c.Image = ""
		for _, k := range DifferingKeys(prev, c) {
			out = append(out, fmt.Sprintf("spec.containers[%d].%s", i, k))
		}
	}
	for _, c := range old.Spec.Containers {
		if !seen[c.Name] {
			out = append(out, fmt.Sprintf("spec.containers (%s) removed", c.Name))
		}
	}
	return out
}

func union(a, b map[string]any) map[string]any {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// DifferingKeys lists, sorted, the top-level keys whose values differ between the JSON encodings
// of a and b (two containers): the field names ChangedFields reports, for callers that compare
// containers of their own (sidecarctl's rollout plan compares a SidecarSet with a pod).
func DifferingKeys(a, b any) []string {
	prev, now := asMap(a), asMap(b)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(union(prev, now))) {
		if !reflect.DeepEqual(prev[k], now[k]) {
			out = append(out, k)
		}
	}
	return out
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
