package main

import (
	"fmt"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/controller/rollout"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

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
