package rollout

import (
	"encoding/json"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/mutation"
)

// UpgradeSpec is one entry of a pod's hash annotations (v1beta1.SidecarSetUpgradeSpec).
type UpgradeSpec = v1beta1.SidecarSetUpgradeSpec

// UpgradeSpecs reads the hash annotation key (v1beta1.SidecarSetHashAnnotation or
// SidecarSetHashWithoutImageAnnotation) of annotations. A value that is neither form yields an
// empty map, as OpenKruise's reader does (S9): the pod then counts as "not updated" and, when it
// is the without-image annotation, as not upgradable, which is the safe reading of garbage.
//
// The map is shared and must not be modified: parses are memoized by value, because a
// controller round reads every pod's annotations several times and every pod event starts a
// round over all of a SidecarSet's pods, whose annotations rarely change.
func UpgradeSpecs(annotations map[string]string, key string) map[string]UpgradeSpec {
	if annotations[key] == "" {
		return map[string]UpgradeSpec{}
	}
	return upgradeSpecs.get(annotations[key])
}

var upgradeSpecs = newMemo(func(raw string) map[string]UpgradeSpec {
	specs, _ := v1beta1.ParseUpgradeSpecs(raw)
	return specs
})

// memo memoizes a parse of annotation values, shared read-only. Bounded: when full it starts
// over, which costs one parse per value again and never a wrong answer. The values are per pod (the
// hash annotations carry each pod's updateTimestamp), and since a pod event reads only that pod
// (controller's tracker) the memo serves the rounds that plan a rollout: 1,024 entries. Counting
// fills it once with values no round reads again, and every entry is a map: sized for every pod,
// it was the largest part of the manager's heap, and four times larger it was still a visible one
// (BenchmarkManagerMemory).
type memo[V any] struct {
	mu    sync.Mutex
	max   int
	m     map[string]V
	parse func(string) V
}

func newMemo[V any](parse func(string) V) *memo[V] {
	return &memo[V]{max: 1 << 10, parse: parse}
}

func (c *memo[V]) get(raw string) V {
	c.mu.Lock()
	v, ok := c.m[raw]
	c.mu.Unlock()
	if ok {
		return v
	}
	v = c.parse(raw)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= c.max {
		c.m = make(map[string]V, 64)
	}
	c.m[raw] = v
	c.mu.Unlock()
	return v
}

func podAnnotations(pod *corev1.Pod) map[string]string {
	if pod == nil {
		return nil
	}
	return pod.Annotations
}

func ssName(ss *v1beta1.SidecarSet) string {
	if ss == nil {
		return ""
	}
	return ss.Name
}

func ssAnnotation(ss *v1beta1.SidecarSet, key string) string {
	if ss == nil {
		return ""
	}
	return ss.Annotations[key]
}

// PodHash is the kruise.io/sidecarset-hash the pod records for SidecarSet name ("" if none).
func PodHash(pod *corev1.Pod, name string) string {
	return UpgradeSpecs(podAnnotations(pod), v1beta1.SidecarSetHashAnnotation)[name].Hash
}

// PodHashWithoutImage is the kruise.io/sidecarset-hash-without-image the pod records for
// SidecarSet name ("" if none).
func PodHashWithoutImage(pod *corev1.Pod, name string) string {
	return UpgradeSpecs(podAnnotations(pod), v1beta1.SidecarSetHashWithoutImageAnnotation)[name].Hash
}

// PodControllerRevision is the ControllerRevision the pod's sidecars of SidecarSet name came
// from ("" if not recorded); such revisions are "active" and survive history truncation.
func PodControllerRevision(pod *corev1.Pod, name string) string {
	return UpgradeSpecs(podAnnotations(pod), v1beta1.SidecarSetHashAnnotation)[name].ControllerRevision
}

// IsUpdated reports whether the pod runs ss's current sidecars: its hash entry equals ss's
// kruise.io/sidecarset-hash annotation. As in OpenKruise, two missing values compare equal.
func IsUpdated(pod *corev1.Pod, ss *v1beta1.SidecarSet) bool {
	return PodHash(pod, ssName(ss)) == ssAnnotation(ss, v1beta1.SidecarSetHashAnnotation)
}

// OnlyImageChanged reports whether the pod's hash-without-image equals ss's: the only difference
// between the pod's sidecars and ss's is then images, which is all Kubernetes lets an in-place
// update change. Two missing values compare equal (C3).
func OnlyImageChanged(pod *corev1.Pod, ss *v1beta1.SidecarSet) bool {
	return PodHashWithoutImage(pod, ssName(ss)) == ssAnnotation(ss, v1beta1.SidecarSetHashWithoutImageAnnotation)
}

// NotUpgradableReason explains why the pod cannot be upgraded in place by ss, or returns "" when
// it can (only images differ). The hashes are opaque, so the reason names them rather than the
// field that differs.
func NotUpgradableReason(pod *corev1.Pod, ss *v1beta1.SidecarSet) string {
	if OnlyImageChanged(pod, ss) {
		return ""
	}
	podHash := PodHashWithoutImage(pod, ssName(ss))
	ssHash := ssAnnotation(ss, v1beta1.SidecarSetHashWithoutImageAnnotation)
	if podHash == "" {
		return "hash-without-image differs: the pod records none for this SidecarSet (SidecarSet's is " + ssHash + ")"
	}
	return "hash-without-image differs: a field other than image changed (pod " + podHash + ", SidecarSet " + ssHash + ")"
}

// HotUpgradeNames returns the two pod container names of a HotUpgrade sidecar.
func HotUpgradeNames(sidecar string) (string, string) {
	return sidecar + "-1", sidecar + "-2"
}

func isHot(c *v1beta1.SidecarContainer) bool {
	return c.UpgradeStrategy.UpgradeType == v1beta1.SidecarContainerHotUpgrade
}

// WorkingHotUpgradeContainers reads kruise.io/sidecarset-working-hotupgrade-container
// (sidecar name → working pod container); a missing or unparsable value reads as empty.
func WorkingHotUpgradeContainers(pod *corev1.Pod) map[string]string {
	m := map[string]string{}
	raw, ok := podAnnotations(pod)[v1beta1.SidecarSetWorkingHotUpgradeContainer]
	if !ok {
		return m
	}
	if err := json.Unmarshal([]byte(raw), &m); err != nil || m == nil {
		return map[string]string{}
	}
	return m
}

// HotUpgradeContainers returns the working twin and the other one (idle, or the old version
// during an upgrade) of HotUpgrade sidecar in pod. Without a record <sidecar>-2 is taken as
// working, as OpenKruise does.
func HotUpgradeContainers(sidecar string, pod *corev1.Pod) (working, other string) {
	n1, n2 := HotUpgradeNames(sidecar)
	if WorkingHotUpgradeContainers(pod)[sidecar] == n1 {
		return n1, n2
	}
	return n2, n1
}

// SidecarContainerNames are the pod container names ss's spec.containers become (both twins of
// a HotUpgrade sidecar), in spec order.
func SidecarContainerNames(ss *v1beta1.SidecarSet) []string {
	if ss == nil {
		return nil
	}
	var names []string
	for i := range ss.Spec.Containers {
		c := &ss.Spec.Containers[i]
		if isHot(c) {
			n1, n2 := HotUpgradeNames(c.Name)
			names = append(names, n1, n2)
		} else {
			names = append(names, c.Name)
		}
	}
	return names
}

// HasSidecarContainers reports whether the pod has every container of ss (compat §3.3
// IsPodConsistentWithSidecarSet): each ColdUpgrade name, and for each HotUpgrade sidecar a
// working-container record and both twins. Pods without them are not managed by ss.
func HasSidecarContainers(pod *corev1.Pod, ss *v1beta1.SidecarSet) bool {
	if pod == nil || ss == nil {
		return false
	}
	have := map[string]bool{}
	for i := range pod.Spec.Containers {
		have[pod.Spec.Containers[i].Name] = true
	}
	working := WorkingHotUpgradeContainers(pod)
	for i := range ss.Spec.Containers {
		c := &ss.Spec.Containers[i]
		if !isHot(c) {
			if !have[c.Name] {
				return false
			}
			continue
		}
		n1, n2 := HotUpgradeNames(c.Name)
		if _, ok := working[c.Name]; !ok || !have[n1] || !have[n2] {
			return false
		}
	}
	return true
}

// IsInjected reports whether the pod's kruise.io/sidecarset-injected-list names ss.
func IsInjected(pod *corev1.Pod, ss *v1beta1.SidecarSet) bool {
	list := podAnnotations(pod)[v1beta1.SidecarSetListAnnotation]
	if list == "" || ss == nil {
		return false
	}
	for _, n := range strings.Split(list, ",") {
		if n == ss.Name {
			return true
		}
	}
	return false
}

// IsManaged is the filter compat §3.3 applies to pods already selected by ss's selector and
// namespace scope: active, injected by ss, and carrying all of ss's containers. Status and Plan
// expect pods that passed it.
func IsManaged(pod *corev1.Pod, ss *v1beta1.SidecarSet) bool {
	return mutation.IsActive(pod) && IsInjected(pod, ss) && HasSidecarContainers(pod, ss)
}

// InPlaceUpdateContainerStatus and InPlaceUpdateState are OpenKruise's pub types stored in
// kruise.io/sidecarset-inplace-update-state (sidecarset name → state).
type InPlaceUpdateContainerStatus struct {
	ImageID string `json:"imageID,omitempty"`
}

// InPlaceUpdateState is one SidecarSet's entry of kruise.io/sidecarset-inplace-update-state.
// Revision is the hash of the first recorded upgrade and never refreshed (quirk Q18).
type InPlaceUpdateState struct {
	Revision              string                                  `json:"revision"`
	UpdateTimestamp       metav1.Time                             `json:"updateTimestamp"`
	LastContainerStatuses map[string]InPlaceUpdateContainerStatus `json:"lastContainerStatuses,omitempty"`
}

// InPlaceUpdateStates reads kruise.io/sidecarset-inplace-update-state. ok is false when the
// annotation is present but unparsable. The map is shared and must not be modified.
func InPlaceUpdateStates(pod *corev1.Pod) (states map[string]InPlaceUpdateState, present, ok bool) {
	raw, present := podAnnotations(pod)[v1beta1.SidecarSetInplaceUpdateStateAnnotation]
	if !present {
		return map[string]InPlaceUpdateState{}, false, true
	}
	p := inPlaceUpdateStates.get(raw)
	return p.states, true, p.ok
}

// inPlaceUpdateStates memoizes the parse of kruise.io/sidecarset-inplace-update-state values; the
// maps are shared and read-only (writers clone them).
var inPlaceUpdateStates = newMemo(func(raw string) parsedStates {
	states := map[string]InPlaceUpdateState{}
	if err := json.Unmarshal([]byte(raw), &states); err != nil {
		return parsedStates{map[string]InPlaceUpdateState{}, false}
	}
	if states == nil {
		states = map[string]InPlaceUpdateState{}
	}
	return parsedStates{states, true}
})

type parsedStates struct {
	states map[string]InPlaceUpdateState
	ok     bool
}

// IsSidecarContainerUpdateCompleted reports whether the kubelet has applied the in-place
// upgrades recorded for sidecarSets on the given pod containers (S1–S6): a recorded container is
// still pending while its status imageID equals the one recorded before the upgrade and its
// status image differs from its spec image. No state annotation → completed (never upgraded);
// an unparsable one → not completed (someone edited it; do not pile another upgrade on top).
func IsSidecarContainerUpdateCompleted(pod *corev1.Pod, sidecarSets, containers []string) bool {
	if pod == nil {
		return false
	}
	states, present, ok := InPlaceUpdateStates(pod)
	if !present {
		return true
	}
	if !ok {
		return false
	}
	last := map[string]InPlaceUpdateContainerStatus{}
	for _, name := range sidecarSets {
		for c, st := range states[name].LastContainerStatuses {
			last[c] = st
		}
	}
	specImage := make(map[string]string, len(pod.Spec.Containers))
	for i := range pod.Spec.Containers {
		specImage[pod.Spec.Containers[i].Name] = pod.Spec.Containers[i].Image
	}
	check := toSet(containers)
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		if !check[cs.Name] {
			continue
		}
		if old, ok := last[cs.Name]; ok && old.ImageID == cs.ImageID && specImage[cs.Name] != cs.Image {
			return false
		}
	}
	return true
}

func toSet(names []string) map[string]bool {
	s := make(map[string]bool, len(names))
	for _, n := range names {
		s[n] = true
	}
	return s
}

// IsPodStateConsistent reports whether the kubelet runs what the pod spec says for ss's sidecar
// containers (compat §3.5): names restricts the check (nil or empty = all of SidecarContainerNames).
// When every checked image is a digest reference the status imageIDs decide; otherwise the
// in-place-update state does.
func IsPodStateConsistent(pod *corev1.Pod, ss *v1beta1.SidecarSet, names []string) bool {
	if pod == nil || ss == nil {
		return false
	}
	if len(pod.Spec.Containers) != len(pod.Status.ContainerStatuses) {
		return false
	}
	if len(names) == 0 {
		names = SidecarContainerNames(ss)
	}
	check := toSet(names)
	imageIDs := map[string]string{}
	for i := range pod.Status.ContainerStatuses {
		imageIDs[pod.Status.ContainerStatuses[i].Name] = pod.Status.ContainerStatuses[i].ImageID
	}
	allDigest := true
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if !check[c.Name] {
			continue
		}
		// OpenKruise stops at the first non-digest image and falls back to the recorded state
		// for all containers; digest containers seen before it are still checked here.
		if !isImageDigest(c.Image) {
			allDigest = false
			break
		}
		id, ok := imageIDs[c.Name]
		if !ok || !imageEqualsID(c.Image, id) {
			return false
		}
	}
	if allDigest {
		return true
	}
	return IsSidecarContainerUpdateCompleted(pod, []string{ss.Name}, names)
}

// isImageDigest: repo@algorithm:hex.
func isImageDigest(image string) bool {
	_, d, ok := strings.Cut(image, "@")
	if !ok {
		return false
	}
	alg, hexPart, ok := strings.Cut(d, ":")
	return ok && alg != "" && hexPart != ""
}

// imageEqualsID compares a digest image with a status imageID ("docker-pullable://repo@sha256:…"
// or "repo@sha256:…") by normalised repository and digest, as OpenKruise's IsContainerImageEqual.
func imageEqualsID(image, imageID string) bool {
	if _, rest, ok := strings.Cut(imageID, "://"); ok {
		imageID = rest
	}
	r1, d1, ok1 := strings.Cut(image, "@")
	r2, d2, ok2 := strings.Cut(imageID, "@")
	return ok1 && ok2 && d1 == d2 && normaliseRepo(r1) == normaliseRepo(r2)
}

// normaliseRepo applies Docker's reference normalisation ("busybox" → "docker.io/library/busybox")
// and drops a tag, so that the short and long forms of one repository compare equal.
func normaliseRepo(repo string) string {
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	first, rest, hasSlash := strings.Cut(repo, "/")
	if !hasSlash || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		if !strings.Contains(repo, "/") {
			repo = "library/" + repo
		}
		return "docker.io/" + repo
	}
	if first == "index.docker.io" {
		return "docker.io/" + rest
	}
	return repo
}

// podConditionReady is Kubernetes' podutil.IsPodReady: the PodReady condition is True.
func podConditionReady(pod *corev1.Pod) bool {
	return readyCondition(pod) != nil
}

func readyCondition(pod *corev1.Pod) *corev1.PodCondition {
	if pod == nil {
		return nil
	}
	for i := range pod.Status.Conditions {
		if c := &pod.Status.Conditions[i]; c.Type == corev1.PodReady {
			if c.Status == corev1.ConditionTrue {
				return c
			}
			return nil
		}
	}
	return nil
}

// IsPodReady is OpenKruise's SidecarSet IsPodReady (compat §3.4): running, PodReady, not being
// deleted, and every HotUpgrade sidecar's idle twin back on the empty image (a hot upgrade still
// in progress makes the pod count as unavailable).
func IsPodReady(pod *corev1.Pod, ss *v1beta1.SidecarSet) bool {
	if pod == nil {
		return false
	}
	if ss != nil {
		empty := map[string]string{}
		for i := range ss.Spec.Containers {
			c := &ss.Spec.Containers[i]
			if isHot(c) {
				_, other := HotUpgradeContainers(c.Name, pod)
				empty[other] = c.UpgradeStrategy.HotUpgradeEmptyImage
			}
		}
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			if img := empty[c.Name]; img != "" && c.Image != img {
				return false
			}
		}
	}
	return pod.Status.Phase == corev1.PodRunning && podConditionReady(pod) && pod.DeletionTimestamp == nil
}

// Upgradability is OpenKruise's IsSidecarSetUpgradable (compat §3.5): canUpgrade is false when more
// than images changed (OnlyImageChanged is false); consistent is false while a sidecar container
// reports Ready but the kubelet has not yet applied the last upgrade to it (an upgrade in flight,
// skipped this round).
func Upgradability(pod *corev1.Pod, ss *v1beta1.SidecarSet) (canUpgrade, consistent bool) {
	if !OnlyImageChanged(pod, ss) {
		return false, false
	}
	if pod == nil || ss == nil {
		return true, false
	}
	ready := map[string]bool{}
	for i := range pod.Status.ContainerStatuses {
		ready[pod.Status.ContainerStatuses[i].Name] = pod.Status.ContainerStatuses[i].Ready
	}
	for _, name := range SidecarContainerNames(ss) {
		if ready[name] && !IsPodStateConsistent(pod, ss, []string{name}) {
			return true, false
		}
	}
	return true, true
}

// IsUnavailableUpdated reports whether an updated pod takes a maxUnavailable slot: it is on ss's
// hash but not yet consistent or not ready.
func IsUnavailableUpdated(pod *corev1.Pod, ss *v1beta1.SidecarSet) bool {
	return IsUpdated(pod, ss) && (!IsPodStateConsistent(pod, ss, nil) || !IsPodReady(pod, ss))
}
