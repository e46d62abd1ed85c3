package injector

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/mutation"
)

// AfterOpenKruise is Pod for a pod that OpenKruise's pod webhook has already mutated: migration path
// B keeps that webhook for everything else it does (container launch priority, PodUnavailableBudget,
// WorkloadSpread...), and the API server calls it before sidecarops' (decision D10). Its SidecarSet
// injection, recorded in the pod's hash annotation, is taken back, so that the policies decide on
// the pod as its author sent it and sidecarops injects as it would alone. Where both injected a
// SidecarSet at the same hash, OpenKruise's containers and hash entries stay as they are: its
// later steps may have changed those containers (launch priority's barrier env), and injection is
// otherwise byte-identical. What OpenKruise injected and sidecarops would not (a gate's veto, a
// collision, the whitelist) is gone from the answer, its volumes with it when nothing mounts them.
//
// A SidecarSet OpenKruise injected that the snapshot does not hold is left as injected: both read
// the same API server, so it is one sidecarops has not loaded yet (just created) or no longer holds
// (just deleted), and OpenKruise alone would have injected it all the same.
//
// The answer's Patch turns the pod as received into that pod; it is empty when both agree.
// Metadata that OpenKruise patched for a SidecarSet taken back (patchPodMetadata) cannot be told from
// the author's and stays. The pod is decided and injected whole, never from a Cache: OpenKruise's
// webhook makes pods of one ReplicaSet differ (the barrier names the pod).
func AfterOpenKruise(ctx context.Context, snap *engine.Snapshot, m *mutation.Injector, req PodRequest) (PodResult, error) {
	received := req.Pod
	// A hash annotation that does not parse leaves nothing to take back: the injection refuses it
	// as it would alone.
	injected, _ := v1beta1.ParseUpgradeSpecs(received.Annotations[v1beta1.SidecarSetHashAnnotation])
	maps.DeleteFunc(injected, func(name string, _ v1beta1.SidecarSetUpgradeSpec) bool {
		_, held := snap.SidecarSet(name)
		return !held
	})
	if len(injected) == 0 {
		return Pod(ctx, snap, m, req)
	}
	base := received.DeepCopy()
	base.Namespace = podNamespace(base.Namespace, req.Namespace)
	if err := takeBack(base, injected, snap); err != nil {
		return PodResult{Namespace: base.Namespace, Pod: received}, err
	}
	res, err := Pod(ctx, snap, m, PodRequest{Pod: base, Namespace: req.Namespace})
	if err != nil {
		return res, err
	}
	// Pod's answer shares memory with the snapshot; the pod is changed below.
	final := res.Pod.DeepCopy()
	ours, err := v1beta1.ParseUpgradeSpecs(final.Annotations[v1beta1.SidecarSetHashAnnotation])
	if err != nil {
		return res, fmt.Errorf("reading the injected pod's %s: %w", v1beta1.SidecarSetHashAnnotation, err)
	}
	var kept []string
	for name, theirs := range injected {
		if mine, ok := ours[name]; ok && mine.Hash == theirs.Hash {
			kept = append(kept, name)
			restoreContainers(final, received, containerNames(name, theirs, snap))
			continue
		}
		if _, ok := ours[name]; !ok {
			dropOrphanVolumes(final, name, snap)
		}
	}
	if err := restoreEntries(final, received, kept); err != nil {
		return res, err
	}
	res.Pod, res.Patch = final, []jsonpatch.JsonPatchOperation{}
	if req.PatchOnly {
		res.Pod = nil
	}
	// The common case, both injecting alike, needs no diff: nothing to encode.
	if reflect.DeepEqual(final, received) {
		return res, nil
	}
	raw := req.Raw
	if raw == nil {
		if raw, err = json.Marshal(received); err != nil {
			return res, fmt.Errorf("encoding the pod: %w", err)
		}
	}
	after, err := json.Marshal(final)
	if err != nil {
		return res, fmt.Errorf("encoding the injected pod: %w", err)
	}
	patch, err := jsonpatch.CreatePatch(raw, after)
	if err != nil {
		return res, fmt.Errorf("diffing the pod OpenKruise injected with sidecarops' answer: %w", err)
	}
	res.Patch = patch
	return res, nil
}

// containerNames are the pod containers a SidecarSet's entry stands for: its sidecarList, the
// hot-upgrade twins of each, and the SidecarSet's plain init containers, which the list leaves out.
func containerNames(name string, entry v1beta1.SidecarSetUpgradeSpec, snap *engine.Snapshot) map[string]bool {
	names := make(map[string]bool, 3*len(entry.SidecarList))
	for _, c := range entry.SidecarList {
		names[c], names[c+"-1"], names[c+"-2"] = true, true, true
	}
	if ss, ok := snap.SidecarSet(name); ok {
		for i := range ss.Spec.InitContainers {
			names[ss.Spec.InitContainers[i].Name] = true
		}
	}
	return names
}

// takeBack removes from pod what OpenKruise's injection of these SidecarSets added and can be told
// apart: the injected containers (they carry IS_INJECTED=true), the SidecarSets' entries in the
// hash annotations and the injected list, and the hot-upgrade annotations of the containers. What
// other SidecarSets recorded stays.
func takeBack(pod *corev1.Pod, injected map[string]v1beta1.SidecarSetUpgradeSpec, snap *engine.Snapshot) error {
	names := map[string]bool{}
	for name, entry := range injected {
		maps.Copy(names, containerNames(name, entry, snap))
	}
	drop := func(c corev1.Container) bool { return names[c.Name] && mutation.IsInjected(&c) }
	pod.Spec.Containers = slices.DeleteFunc(pod.Spec.Containers, drop)
	pod.Spec.InitContainers = slices.DeleteFunc(pod.Spec.InitContainers, drop)
	if len(pod.Spec.InitContainers) == 0 {
		pod.Spec.InitContainers = nil
	}
	ann := pod.Annotations
	for _, key := range []string{v1beta1.SidecarSetHashAnnotation, v1beta1.SidecarSetHashWithoutImageAnnotation} {
		if err := withoutKeys(ann, key, func(k string) bool { _, ok := injected[k]; return ok }); err != nil {
			return err
		}
	}
	// A value that does not parse is kept, as the injection keeps it (mutation's workingHotUpgrade).
	_ = withoutKeys(ann, v1beta1.SidecarSetWorkingHotUpgradeContainer, func(k string) bool { return names[k] })
	if list, ok := ann[v1beta1.SidecarSetListAnnotation]; ok {
		kept := slices.DeleteFunc(strings.Split(list, ","), func(n string) bool { _, ok := injected[n]; return ok || n == "" })
		if len(kept) == 0 {
			delete(ann, v1beta1.SidecarSetListAnnotation)
		} else {
			ann[v1beta1.SidecarSetListAnnotation] = strings.Join(kept, ",")
		}
	}
	for key := range ann {
		for _, prefix := range []string{v1beta1.SidecarSetVersionAnnotationPrefix, v1beta1.SidecarSetVersionAltAnnotationPrefix} {
			if c, ok := strings.CutPrefix(key, prefix); ok && names[c] {
				delete(ann, key)
			}
		}
	}
	if len(ann) == 0 {
		pod.Annotations = nil
	}
	return nil
}

// withoutKeys removes the entries drop names from the JSON object in annotation key, and the
// annotation when none is left.
func withoutKeys(ann map[string]string, key string, drop func(string) bool) error {
	raw, ok := ann[key]
	if !ok {
		return nil
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &entries); err != nil {
		return fmt.Errorf("reading the pod's %s: %w", key, err)
	}
	maps.DeleteFunc(entries, func(k string, _ json.RawMessage) bool { return drop(k) })
	if len(entries) == 0 {
		delete(ann, key)
		return nil
	}
	value, err := json.Marshal(entries)
	if err != nil {
		return fmt.Errorf("encoding the pod's %s: %w", key, err)
	}
	ann[key] = string(value)
	return nil
}

// restoreContainers puts back, in final, the received pod's containers of these names where final
// has one of the name.
func restoreContainers(final, received *corev1.Pod, names map[string]bool) {
	restore := func(into, from []corev1.Container) {
		for i := range into {
			if !names[into[i].Name] {
				continue
			}
			for j := range from {
				if from[j].Name == into[i].Name {
					into[i] = from[j]
				}
			}
		}
	}
	restore(final.Spec.Containers, received.Spec.Containers)
	restore(final.Spec.InitContainers, received.Spec.InitContainers)
}

// restoreEntries puts the received pod's entries of the kept SidecarSets back into final's hash
// annotations: they differ from sidecarops' at most in when they were recorded.
func restoreEntries(final, received *corev1.Pod, kept []string) error {
	if len(kept) == 0 {
		return nil
	}
	for _, key := range []string{v1beta1.SidecarSetHashAnnotation, v1beta1.SidecarSetHashWithoutImageAnnotation} {
		var theirs, ours map[string]json.RawMessage
		if json.Unmarshal([]byte(received.Annotations[key]), &theirs) != nil || theirs == nil {
			continue
		}
		if err := json.Unmarshal([]byte(final.Annotations[key]), &ours); err != nil || ours == nil {
			continue
		}
		for _, name := range kept {
			if entry, ok := theirs[name]; ok {
				ours[name] = entry
			}
		}
		value, err := json.Marshal(ours)
		if err != nil {
			return fmt.Errorf("encoding the pod's %s: %w", key, err)
		}
		final.Annotations[key] = string(value)
	}
	return nil
}

// dropOrphanVolumes removes from pod the volumes a SidecarSet taken back would have brought, as the
// snapshot's SidecarSet catalogues them, that no container mounts: a volume stays in a pod's spec
// whether or not anything mounts it, and one naming a Secret that is not there keeps the pod from
// starting.
func dropOrphanVolumes(pod *corev1.Pod, name string, snap *engine.Snapshot) {
	ss, ok := snap.SidecarSet(name)
	if !ok || len(ss.Spec.Volumes) == 0 {
		return
	}
	used := map[string]bool{}
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			for _, m := range list[i].VolumeMounts {
				used[m.Name] = true
			}
			for _, d := range list[i].VolumeDevices {
				used[d.Name] = true
			}
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		for _, m := range pod.Spec.EphemeralContainers[i].VolumeMounts {
			used[m.Name] = true
		}
	}
	pod.Spec.Volumes = slices.DeleteFunc(pod.Spec.Volumes, func(v corev1.Volume) bool {
		if used[v.Name] {
			return false
		}
		return slices.ContainsFunc(ss.Spec.Volumes, func(c corev1.Volume) bool {
			return c.Name == v.Name && apiequality.Semantic.DeepEqual(c.VolumeSource, v.VolumeSource)
		})
	})
}
