package rollout

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/mutation"
)

// Upgrade returns a copy of pod upgraded in place to ss (compat §3.6) and the pod containers whose
// image it changed:
//
//  1. each ColdUpgrade sidecar's container gets ss's image (nothing else of the container
//     changes: Kubernetes only lets an in-place update change images); each HotUpgrade sidecar's
//     chosen twin (HotUpgradeTarget) gets it, becomes the working container, and the version
//     annotations move (new twin: ss's resourceVersion, its alt: the old twin's version; old
//     twin's alt: ss's resourceVersion);
//  2. ss's entry of kruise.io/sidecarset-hash is rewritten (HashAnnotationsAfterUpgrade);
//  3. the changed containers' current imageIDs are recorded in
//     kruise.io/sidecarset-inplace-update-state, which is how consistency is later judged;
//  4. ss's patchPodMetadata is applied.
//
// The hash is rewritten even when no image changed (C5: a pod whose sidecars already run ss's
// images). OpenKruise also fills a missing injected-list here; managed pods always carry it
// (IsManaged), so that branch cannot be reached from a plan and is not reproduced.
func Upgrade(pod *corev1.Pod, ss *v1beta1.SidecarSet, now time.Time) (*corev1.Pod, []string, error) {
	out, err := copyToChange(pod, ss, "Upgrade")
	if err != nil {
		return nil, nil, err
	}
	var changed []string
	for i := range ss.Spec.Containers {
		sc := &ss.Spec.Containers[i]
		target, other := sc.Name, ""
		if isHot(sc) {
			target, other = HotUpgradeTarget(out, ss, sc)
		}
		c := podContainer(out, target)
		if c == nil {
			return nil, nil, fmt.Errorf("rollout: pod %s/%s has no container %q of SidecarSet %s", pod.Namespace, pod.Name, target, ss.Name)
		}
		current := c.Image
		if other != "" {
			o := podContainer(out, other)
			if o == nil {
				return nil, nil, fmt.Errorf("rollout: pod %s/%s has no container %q of SidecarSet %s", pod.Namespace, pod.Name, other, ss.Name)
			}
			// A hot sidecar is up to date when the twin still serving already runs the image.
			current = o.Image
		}
		if current == sc.Image {
			continue
		}
		c.Image = sc.Image
		changed = append(changed, target)
		if other != "" {
			working := WorkingHotUpgradeContainers(out)
			working[sc.Name] = target
			out.Annotations[v1beta1.SidecarSetWorkingHotUpgradeContainer] = mustJSON(working)
			out.Annotations[v1beta1.SidecarSetVersionAnnotationPrefix+target] = ss.ResourceVersion
			out.Annotations[v1beta1.SidecarSetVersionAltAnnotationPrefix+target] = out.Annotations[v1beta1.SidecarSetVersionAnnotationPrefix+other]
			out.Annotations[v1beta1.SidecarSetVersionAltAnnotationPrefix+other] = ss.ResourceVersion
		}
	}
	for k, v := range HashAnnotationsAfterUpgrade(out, ss, now) {
		out.Annotations[k] = v
	}
	if err := recordInPlaceUpdate(out, ss, changed, now); err != nil {
		return nil, nil, err
	}
	if err := mutation.PatchPodMetadata(out.Annotations, ss); err != nil {
		return nil, nil, err
	}
	return out, changed, nil
}

// HotUpgradeTarget chooses which twin of HotUpgrade sidecar sc receives the new image, and the
// other one (OpenKruise's findContainerToHotUpgrade): the twin on the empty image; else the one
// that is not ready-and-consistent when its twin is; else the non-working (older) twin.
func HotUpgradeTarget(pod *corev1.Pod, ss *v1beta1.SidecarSet, sc *v1beta1.SidecarContainer) (target, other string) {
	n1, n2 := HotUpgradeNames(sc.Name)
	empty := sc.UpgradeStrategy.HotUpgradeEmptyImage
	if c := podContainer(pod, n1); c != nil && c.Image == empty {
		return n1, n2
	}
	if c := podContainer(pod, n2); c != nil && c.Image == empty {
		return n2, n1
	}
	r1, r2 := containerReadyAndConsistent(pod, ss, n1), containerReadyAndConsistent(pod, ss, n2)
	switch {
	case r1 && !r2:
		return n2, n1
	case !r1 && r2:
		return n1, n2
	}
	working, idle := HotUpgradeContainers(sc.Name, pod)
	return idle, working
}

func containerReadyAndConsistent(pod *corev1.Pod, ss *v1beta1.SidecarSet, name string) bool {
	for i := range pod.Status.ContainerStatuses {
		if cs := &pod.Status.ContainerStatuses[i]; cs.Name == name {
			return cs.Ready && IsPodStateConsistent(pod, ss, []string{name})
		}
	}
	return false
}

// ReadyToReset reports whether the pod has finished the first step of a hot upgrade of ss and
// its old twin can go back to the empty image (compat §3.9 step 3): some HotUpgrade sidecar's
// non-working twin is not on the empty image, every other sidecar container of ss is consistent,
// and the pod is running and ready, or at least every container but the idle twins is ready.
func ReadyToReset(pod *corev1.Pod, ss *v1beta1.SidecarSet) bool {
	if !IsHotUpgrading(pod, ss) {
		return false
	}
	idle := map[string]bool{}
	for i := range ss.Spec.Containers {
		if c := &ss.Spec.Containers[i]; isHot(c) {
			_, other := HotUpgradeContainers(c.Name, pod)
			idle[other] = true
		}
	}
	var check []string
	for _, n := range SidecarContainerNames(ss) {
		if !idle[n] {
			check = append(check, n)
		}
	}
	if !IsPodStateConsistent(pod, ss, check) {
		return false
	}
	if pod.Status.Phase == corev1.PodRunning && podConditionReady(pod) {
		return true
	}
	for i := range pod.Status.ContainerStatuses {
		if cs := &pod.Status.ContainerStatuses[i]; !idle[cs.Name] && !cs.Ready {
			return false
		}
	}
	return true
}

// Reset returns a copy of pod with the old twin of every HotUpgrade sidecar of ss put back on the
// empty image (compat §3.9 step 3), and the containers it changed: version.<old twin> = "0",
// versionalt.<working twin> = "0", and the change recorded in the in-place-update state so that
// consistency waits for the kubelet. The hash annotation is not touched: the pod already records
// ss's hash since step 1.
func Reset(pod *corev1.Pod, ss *v1beta1.SidecarSet, now time.Time) (*corev1.Pod, []string, error) {
	out, err := copyToChange(pod, ss, "Reset")
	if err != nil {
		return nil, nil, err
	}
	var changed []string
	for i := range ss.Spec.Containers {
		sc := &ss.Spec.Containers[i]
		if !isHot(sc) {
			continue
		}
		working, other := HotUpgradeContainers(sc.Name, out)
		c := podContainer(out, other)
		if c == nil {
			return nil, nil, fmt.Errorf("rollout: pod %s/%s has no container %q of SidecarSet %s", pod.Namespace, pod.Name, other, ss.Name)
		}
		if c.Image == sc.UpgradeStrategy.HotUpgradeEmptyImage {
			continue
		}
		c.Image = sc.UpgradeStrategy.HotUpgradeEmptyImage
		changed = append(changed, other)
		out.Annotations[v1beta1.SidecarSetVersionAnnotationPrefix+other] = "0"
		out.Annotations[v1beta1.SidecarSetVersionAltAnnotationPrefix+working] = "0"
	}
	if err := recordInPlaceUpdate(out, ss, changed, now); err != nil {
		return nil, nil, err
	}
	return out, changed, nil
}

// copyToChange is the copy of pod that Upgrade and Reset change, with annotations to write into.
func copyToChange(pod *corev1.Pod, ss *v1beta1.SidecarSet, op string) (*corev1.Pod, error) {
	if pod == nil || ss == nil {
		return nil, fmt.Errorf("rollout: %s needs a pod and a SidecarSet", op)
	}
	out := pod.DeepCopy()
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	return out, nil
}

// recordInPlaceUpdate writes the changed containers' current status imageIDs into ss's entry of
// kruise.io/sidecarset-inplace-update-state. An existing entry keeps its revision and timestamp
// (quirk Q18); container entries are overwritten. An unparsable annotation is an error rather than
// being replaced: it holds other SidecarSets' records too.
func recordInPlaceUpdate(pod *corev1.Pod, ss *v1beta1.SidecarSet, changed []string, now time.Time) error {
	shared, _, ok := InPlaceUpdateStates(pod)
	states := maps.Clone(shared)
	if !ok {
		return fmt.Errorf("rollout: pod %s/%s: annotation %s is not valid JSON; not overwriting it", pod.Namespace, pod.Name, v1beta1.SidecarSetInplaceUpdateStateAnnotation)
	}
	st, exists := states[ss.Name]
	if !exists {
		st = InPlaceUpdateState{Revision: ss.Annotations[v1beta1.SidecarSetHashAnnotation], UpdateTimestamp: metav1.NewTime(now)}
	}
	// The parsed states are shared (memoized): copy what is written.
	st.LastContainerStatuses = maps.Clone(st.LastContainerStatuses)
	if st.LastContainerStatuses == nil {
		st.LastContainerStatuses = map[string]InPlaceUpdateContainerStatus{}
	}
	ids := map[string]string{}
	for i := range pod.Status.ContainerStatuses {
		ids[pod.Status.ContainerStatuses[i].Name] = pod.Status.ContainerStatuses[i].ImageID
	}
	for _, name := range changed {
		st.LastContainerStatuses[name] = InPlaceUpdateContainerStatus{ImageID: ids[name]}
	}
	states[ss.Name] = st
	b, err := json.Marshal(states)
	if err != nil {
		return err
	}
	pod.Annotations[v1beta1.SidecarSetInplaceUpdateStateAnnotation] = string(b)
	return nil
}

func podContainer(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// Round is what one reconcile of ss does to its managed pods after status and expectations (ref
// compat §3.2 steps 6–10): reset finished hot upgrades, or else upgrade Plan.Upgrade and mark
// Plan.NotUpgradable.
type Round struct {
	// Reset are pods whose hot upgrade reached step 3 (ReadyToReset); when any exist, the round
	// resets them and does nothing else, as OpenKruise does.
	Reset []*corev1.Pod
	// Plan is NextUpgrade's plan; with Reset set it is Stopped (StoppedResetting).
	Plan Plan
}

// NextRound decides one round: nothing when the strategy stops the rollout (NotUpdate, paused),
// resets when a hot upgrade awaits one, otherwise the NextUpgrade plan.
func NextRound(ss *v1beta1.SidecarSet, pods []*corev1.Pod) Round {
	r := Round{Plan: NextUpgrade(ss, pods)}
	if r.Plan.Stopped != "" {
		return r
	}
	for _, pod := range pods {
		if pod != nil && ReadyToReset(pod, ss) {
			r.Reset = append(r.Reset, pod)
		}
	}
	if len(r.Reset) > 0 {
		r.Plan.Stopped = StoppedResetting
		r.Plan.HeldByMaxUnavailable = append(r.Plan.Upgrade, r.Plan.HeldByMaxUnavailable...)
		r.Plan.Upgrade = nil
	}
	return r
}

// NextRoundOf is NextRound from what the controller keeps as pods come and go (NextUpgradeOf):
// for a SidecarSet passing PlansFromCounts, which has nothing to reset.
func NextRoundOf(ss *v1beta1.SidecarSet, notUpdated []*corev1.Pod, c Counts) Round {
	return Round{Plan: NextUpgradeOf(ss, notUpdated, c)}
}
