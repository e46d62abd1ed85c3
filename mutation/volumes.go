package mutation

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// sharedDevices collects the app containers' volumeDevices for a sidecar whose
// shareVolumeDevicePolicy is enabled (compat §1.15, W35–W36). The policy is a pointer so that older
// SidecarSets keep their hash; nil means disabled. They point into the pod, as sharedMountsAndEnvs'.
func sharedDevices(sc *v1beta1.SidecarContainer, pod *corev1.Pod) []*corev1.VolumeDevice {
	if sc.ShareVolumeDevicePolicy == nil || sc.ShareVolumeDevicePolicy.Type != v1beta1.ShareVolumePolicyEnabled {
		return nil
	}
	var out []*corev1.VolumeDevice
	for i := range pod.Spec.Containers {
		app := &pod.Spec.Containers[i]
		if IsInjected(app) {
			continue
		}
		for j := range app.VolumeDevices {
			out = append(out, &app.VolumeDevices[j])
		}
	}
	return out
}

// mergeMounts keeps the sidecar's own mounts and appends shared ones whose mountPath is still free.
// A path taken by one of the sidecar's devices is not free either: Kubernetes rejects a container
// whose mountPath and devicePath collide.
func mergeMounts(own []corev1.VolumeMount, shared []*corev1.VolumeMount, devices []corev1.VolumeDevice) []corev1.VolumeMount {
	if len(shared) == 0 {
		return own
	}
	var taken paths
	for _, m := range own {
		taken.claim(m.MountPath)
	}
	for _, d := range devices {
		taken.claim(d.DevicePath)
	}
	return appendUnclaimed(slices.Grow(own, len(shared)), shared, func(m *corev1.VolumeMount) string { return m.MountPath }, &taken)
}

// mergeDevices is mergeMounts for devices, checked against the already merged mounts.
func mergeDevices(own []corev1.VolumeDevice, shared []*corev1.VolumeDevice, mounts []corev1.VolumeMount) []corev1.VolumeDevice {
	if len(shared) == 0 {
		return own
	}
	var taken paths
	for _, d := range own {
		taken.claim(d.DevicePath)
	}
	for _, m := range mounts {
		taken.claim(m.MountPath)
	}
	return appendUnclaimed(own, shared, func(d *corev1.VolumeDevice) string { return d.DevicePath }, &taken)
}

// appendUnclaimed appends the items whose path is not taken, claiming each path as it goes, so two
// app containers mounting the same path share it once.
func appendUnclaimed[T any](own []T, shared []*T, path func(*T) string, taken *paths) []T {
	for _, x := range shared {
		if taken.claim(path(x)) {
			own = append(own, *x)
		}
	}
	return own
}

// pathsListed is how many paths a paths set holds in its list before it moves them to a map.
const pathsListed = 16

// paths is a set of mount and device paths: a list searched in turn while it is short, as it is for
// most pods (a map was most of the cost of sharing a pod's volumes, BenchmarkPerPod), then a map, so
// that a pod with thousands of mounts still costs time linear in them.
type paths struct {
	list [pathsListed]string
	n    int // of list
	set  map[string]struct{}
}

// claim adds p to the set and reports whether it was not there.
func (s *paths) claim(p string) bool {
	if s.set == nil {
		if slices.Contains(s.list[:s.n], p) {
			return false
		}
		if s.n < pathsListed {
			s.list[s.n] = p
			s.n++
			return true
		}
		s.set = make(map[string]struct{}, 2*pathsListed)
		for _, q := range s.list {
			s.set[q] = struct{}{}
		}
	}
	if _, ok := s.set[p]; ok {
		return false
	}
	s.set[p] = struct{}{}
	return true
}

// catalogue indexes a SidecarSet's spec.volumes by name (last wins, as OpenKruise's map).
type catalogue map[string]*corev1.Volume

func newCatalogue(ss *v1beta1.SidecarSet) catalogue {
	c := make(catalogue, len(ss.Spec.Volumes))
	for i := range ss.Spec.Volumes {
		c[ss.Spec.Volumes[i].Name] = &ss.Spec.Volumes[i]
	}
	return c
}

// appendReferenced appends to out the catalogue volumes a sidecar's own mounts, then own devices,
// refer to (W38 order). Shared mounts are not looked up: their volumes are the pod's. A reference
// the catalogue lacks is skipped (W37): validation reports it on the SidecarSet, and refusing the pod
// here would block its creation for a SidecarSet bug. The volumes are the SidecarSet's own: nothing
// writes into them, and the result pod and patch are read-only.
func (c catalogue) appendReferenced(out []*corev1.Volume, sc *v1beta1.SidecarContainer) []*corev1.Volume {
	for _, m := range sc.VolumeMounts {
		if v, ok := c[m.Name]; ok {
			out = append(out, v)
		}
	}
	for _, d := range sc.VolumeDevices {
		if v, ok := c[d.Name]; ok {
			out = append(out, v)
		}
	}
	return out
}

// mergeVolumes is OpenKruise's MergeVolumes, as a plan against the pod's list: the pod's volumes
// first, then the collected ones, first of a name wins, so a pod volume always beats a SidecarSet
// volume of the same name.
func mergeVolumes(pod []corev1.Volume, collected []*corev1.Volume) listGrowth[corev1.Volume] {
	g := listGrowth[corev1.Volume]{origLen: len(pod)}
	seen := make(map[string]bool, len(pod)+len(collected))
	for i := range pod {
		seen[pod[i].Name] = true
	}
	for i, v := range collected {
		if !seen[v.Name] {
			seen[v.Name] = true
			if g.back == nil {
				g.back = make([]*corev1.Volume, 0, len(collected)-i)
			}
			g.back = append(g.back, v)
		}
	}
	return g
}

// mergeSecrets is OpenKruise's mergeSidecarSecrets: pod secrets first, then the SidecarSets',
// deduplicated by name over the whole list, so the pod's own duplicates collapse too (W2). The
// second result says whether the list changed; a collapse can remove elements, so the patch writes
// the list whole rather than as element operations.
func mergeSecrets(pod []corev1.LocalObjectReference, sidecar []corev1.LocalObjectReference) ([]corev1.LocalObjectReference, bool) {
	seen := make(map[string]bool, len(pod)+len(sidecar))
	if len(sidecar) == 0 { // the usual case: unchanged unless the pod's own collapse
		for _, s := range pod {
			seen[s.Name] = true
		}
		if len(seen) == len(pod) {
			return pod, false
		}
		clear(seen)
	}
	var out []corev1.LocalObjectReference
	for _, list := range [][]corev1.LocalObjectReference{pod, sidecar} {
		for _, s := range list {
			if seen[s.Name] {
				continue
			}
			seen[s.Name] = true
			out = append(out, s)
		}
	}
	return out, !slices.Equal(out, pod)
}
