package rollout

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// The compat §4.5 fixture: main, cold-sidecar, hot-sidecar-1 (working), hot-sidecar-2 (empty).
func ssS() *v1beta1.SidecarSet {
	return &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "test-sidecarset", Annotations: map[string]string{
			v1beta1.SidecarSetHashAnnotation:             "bbb",
			v1beta1.SidecarSetHashWithoutImageAnnotation: "without-image-aaa",
		}},
		Spec: v1beta1.SidecarSetSpec{Containers: []v1beta1.SidecarContainer{
			{Container: corev1.Container{Name: "cold-sidecar", Image: "cold-sidecar:v1"}},
			{Container: corev1.Container{Name: "hot-sidecar", Image: "hot-sidecar:v1"},
				UpgradeStrategy: v1beta1.SidecarContainerUpgradeStrategy{UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "hotupgrade:empty"}},
		}},
	}
}

func podS() *corev1.Pod {
	c := func(name, image string) corev1.Container { return corev1.Container{Name: name, Image: image} }
	s := func(name, image, id string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, Image: image, ImageID: id, Ready: true}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{
			v1beta1.SidecarSetWorkingHotUpgradeContainer: `{"hot-sidecar":"hot-sidecar-1"}`,
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			c("main", "main:v1"), c("cold-sidecar", "cold-sidecar:v1"), c("hot-sidecar-1", "hot-sidecar:v1"), c("hot-sidecar-2", "hotupgrade:empty"),
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			s("main", "main:v1", "main-v1-id"), s("cold-sidecar", "cold-sidecar:v1", "cold-v1-id"),
			s("hot-sidecar-1", "hot-sidecar:v1", "hot-v1-id"), s("hot-sidecar-2", "hotupgrade:empty", "empty-id"),
		}},
	}
}

func record(t *testing.T, p *corev1.Pod, ids map[string]string) {
	st := InPlaceUpdateState{Revision: "bbb", LastContainerStatuses: map[string]InPlaceUpdateContainerStatus{}}
	for c, id := range ids {
		st.LastContainerStatuses[c] = InPlaceUpdateContainerStatus{ImageID: id}
	}
	b, err := json.Marshal(map[string]InPlaceUpdateState{"test-sidecarset": st})
	require.NoError(t, err)
	p.Annotations[v1beta1.SidecarSetInplaceUpdateStateAnnotation] = string(b)
}

func setStatus(p *corev1.Pod, name, image, id string) {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			p.Status.ContainerStatuses[i].Image, p.Status.ContainerStatuses[i].ImageID = image, id
		}
	}
}

func setSpec(p *corev1.Pod, name, image string) {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == name {
			p.Spec.Containers[i].Image = image
		}
	}
}

func TestUpdateCompletedS1toS6(t *testing.T) {
	ss := ssS()
	sidecars := []string{"cold-sidecar", "hot-sidecar-1", "hot-sidecar-2"}
	done := func(p *corev1.Pod) bool {
		return IsSidecarContainerUpdateCompleted(p, []string{"test-sidecarset"}, sidecars)
	}
	p := podS()
	assert.True(t, done(p), "S1: no in-place state")
	assert.True(t, IsPodStateConsistent(p, ss, nil), "S1 via IsPodStateConsistent")

	setSpec(p, "cold-sidecar", "cold-sidecar:v2")
	record(t, p, map[string]string{"cold-sidecar": "cold-v1-id"})
	assert.False(t, done(p), "S2: kubelet still runs the old imageID")
	assert.False(t, IsPodStateConsistent(p, ss, nil), "S2 via IsPodStateConsistent")

	setStatus(p, "cold-sidecar", "cold-sidecar:v2", "cold-v2-id")
	assert.True(t, done(p), "S3")

	setSpec(p, "hot-sidecar-2", "hot-sidecar:v2")
	record(t, p, map[string]string{"cold-sidecar": "cold-v1-id", "hot-sidecar-2": "empty-id"})
	assert.False(t, done(p), "S4")

	setStatus(p, "hot-sidecar-2", "hot-sidecar:v2", "hot-v2-id")
	setSpec(p, "hot-sidecar-1", "hotupgrade:empty")
	record(t, p, map[string]string{"cold-sidecar": "cold-v1-id", "hot-sidecar-2": "empty-id", "hot-sidecar-1": "hot-v1-id"})
	assert.False(t, done(p), "S5")

	setStatus(p, "hot-sidecar-1", "hotupgrade:empty", "empty-id")
	assert.True(t, done(p), "S6")

	p.Annotations[v1beta1.SidecarSetInplaceUpdateStateAnnotation] = "{garbage"
	assert.False(t, done(p), "unparsable state is not completed")
}

func TestHashReadersS7toS9(t *testing.T) {
	for _, tc := range []struct {
		id, hash, withoutImage string
		wantHash, wantWI       string
	}{
		{"S7", `{"test-sidecarset":{"hash":"aaa"}}`, `{"test-sidecarset":{"hash":"without-image-aaa"}}`, "aaa", "without-image-aaa"},
		{"S8", `{"test-sidecarset":"aaa"}`, `{"test-sidecarset":"without-image-aaa"}`, "aaa", "without-image-aaa"},
		{"S9", `failed`, `failed`, "", ""},
	} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			v1beta1.SidecarSetHashAnnotation: tc.hash, v1beta1.SidecarSetHashWithoutImageAnnotation: tc.withoutImage}}}
		assert.Equal(t, tc.wantHash, PodHash(p, "test-sidecarset"), tc.id)
		assert.Equal(t, tc.wantWI, PodHashWithoutImage(p, "test-sidecarset"), tc.id)
	}
	assert.Equal(t, "", PodHash(nil, "x"))
	assert.Equal(t, "", PodHash(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1beta1.SidecarSetHashAnnotation: "null"}}}, "x"))
}

func TestHashAnnotationsAfterUpgradeS10(t *testing.T) {
	ss := ssS()
	ss.Status.LatestRevision = "test-sidecarset-rev"
	for _, tc := range []struct {
		id, hash, withoutImage string
		wiConverted            bool
	}{
		{"structured", `{"test-sidecarset":{"hash":"aaa"}}`, `{"test-sidecarset":{"hash":"without-image-aaa"}}`, false},
		{"legacy", `{"test-sidecarset":"aaa"}`, `{"test-sidecarset":"without-image-aaa"}`, true},
		{"garbage", `failed`, `failed`, false},
	} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			v1beta1.SidecarSetHashAnnotation: tc.hash, v1beta1.SidecarSetHashWithoutImageAnnotation: tc.withoutImage}}}
		out := HashAnnotationsAfterUpgrade(p, ss, t0)
		assert.Equal(t, tc.hash, p.Annotations[v1beta1.SidecarSetHashAnnotation], "%s: input untouched", tc.id)
		after := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			v1beta1.SidecarSetHashAnnotation: tc.hash, v1beta1.SidecarSetHashWithoutImageAnnotation: tc.withoutImage}}}
		for k, v := range out {
			after.Annotations[k] = v
		}
		assert.Equal(t, "bbb", PodHash(after, "test-sidecarset"), tc.id)
		assert.Equal(t, "test-sidecarset-rev", PodControllerRevision(after, "test-sidecarset"), tc.id)
		_, converted := out[v1beta1.SidecarSetHashWithoutImageAnnotation]
		assert.Equal(t, tc.wiConverted, converted, tc.id)
		if tc.id != "garbage" {
			assert.Equal(t, "without-image-aaa", PodHashWithoutImage(after, "test-sidecarset"), tc.id)
		} else {
			assert.Equal(t, "failed", after.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation], "garbage left as is")
		}
		specs := UpgradeSpecs(after.Annotations, v1beta1.SidecarSetHashAnnotation)
		assert.Equal(t, []string{"cold-sidecar", "hot-sidecar"}, specs["test-sidecarset"].SidecarList)
	}
}

func TestHotUpgradeAndReadiness(t *testing.T) {
	ss, p := ssS(), podS()
	w, o := HotUpgradeContainers("hot-sidecar", p)
	assert.Equal(t, []string{"hot-sidecar-1", "hot-sidecar-2"}, []string{w, o})
	assert.Equal(t, []string{"cold-sidecar", "hot-sidecar-1", "hot-sidecar-2"}, SidecarContainerNames(ss))
	assert.True(t, HasSidecarContainers(p, ss))
	assert.False(t, IsHotUpgrading(p, ss))
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	assert.True(t, IsPodReady(p, ss))

	// Upgrade step: -2 gets v2 and becomes the working twin; -1 is no longer idle → not ready.
	setSpec(p, "hot-sidecar-2", "hot-sidecar:v2")
	p.Annotations[v1beta1.SidecarSetWorkingHotUpgradeContainer] = `{"hot-sidecar":"hot-sidecar-2"}`
	assert.True(t, IsHotUpgrading(p, ss))
	assert.False(t, IsPodReady(p, ss), "idle twin not on the empty image")

	delete(p.Annotations, v1beta1.SidecarSetWorkingHotUpgradeContainer)
	assert.False(t, HasSidecarContainers(p, ss), "no working record → not managed")
	p.Spec.Containers = p.Spec.Containers[:2]
	assert.False(t, HasSidecarContainers(p, ss))
}

func TestUpgradability(t *testing.T) {
	ss := ssC13()
	p := podC13(0)
	can, cons := Upgradability(p, ss)
	assert.True(t, can && cons)

	upgraded(p) // in flight: Ready status but kubelet not yet on v2
	can, cons = Upgradability(p, ss)
	assert.True(t, can)
	assert.False(t, cons)

	p = podC13(1)
	p.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation] = hashAnn("test-sidecarset", "without-bbb")
	can, _ = Upgradability(p, ss)
	assert.False(t, can)
	assert.Contains(t, NotUpgradableReason(p, ss), "hash-without-image differs")

	// C3 note: neither side carrying a without-image hash counts as equal.
	p = podC13(2)
	delete(p.Annotations, v1beta1.SidecarSetHashWithoutImageAnnotation)
	ss2 := ssC13()
	delete(ss2.Annotations, v1beta1.SidecarSetHashWithoutImageAnnotation)
	assert.True(t, OnlyImageChanged(p, ss2))
	assert.False(t, OnlyImageChanged(p, ss))
	assert.Contains(t, NotUpgradableReason(p, ss), "records none")
}

func TestDigestConsistency(t *testing.T) {
	ss := ssC13()
	p := podC13(0)
	p.Spec.Containers[1].Image = "busybox@sha256:abc"
	p.Status.ContainerStatuses[1].ImageID = "docker-pullable://docker.io/library/busybox@sha256:abc"
	assert.True(t, IsPodStateConsistent(p, ss, nil))
	p.Status.ContainerStatuses[1].ImageID = "docker-pullable://docker.io/library/busybox@sha256:def"
	assert.False(t, IsPodStateConsistent(p, ss, nil))
	p.Status.ContainerStatuses = p.Status.ContainerStatuses[:1]
	assert.False(t, IsPodStateConsistent(p, ss, nil), "status count differs from spec")
}

func TestIsManaged(t *testing.T) {
	ss := ssC13()
	p := podC13(0)
	assert.True(t, IsManaged(p, ss))
	p.Annotations[v1beta1.SidecarSetListAnnotation] = "other,test-sidecarset-2"
	assert.False(t, IsManaged(p, ss))
	p = podC13(0)
	p.Status.Phase = corev1.PodSucceeded
	assert.False(t, IsManaged(p, ss))
	assert.False(t, IsManaged(nil, ss))
}

// The memoized parse is shared: writers copy it, so reading a pod after planning its upgrade
// still gives the pod's own values, and a full cache starts over without changing answers.
func TestUpgradeSpecsMemoIsNotWrittenThrough(t *testing.T) {
	pod := podC13(0)
	before := UpgradeSpecs(pod.Annotations, v1beta1.SidecarSetHashAnnotation)
	require.Equal(t, "aaa", before["test-sidecarset"].Hash)
	out := HashAnnotationsAfterUpgrade(pod, ssC13(), t0)
	assert.Contains(t, out[v1beta1.SidecarSetHashAnnotation], `"hash":"bbb"`)
	assert.Equal(t, "aaa", UpgradeSpecs(pod.Annotations, v1beta1.SidecarSetHashAnnotation)["test-sidecarset"].Hash)
	assert.Equal(t, "aaa", PodHash(pod, "test-sidecarset"))

	// A pod upgraded before (state recorded) whose sidecar is to change again.
	pod.Annotations[v1beta1.SidecarSetInplaceUpdateStateAnnotation] =
		`{"test-sidecarset":{"revision":"zzz","updateTimestamp":null,"lastContainerStatuses":{"test-sidecar":{"imageID":"v0-id"}}}}`
	next, changed, err := Upgrade(pod, ssC13(), t0)
	require.NoError(t, err)
	require.Equal(t, []string{"test-sidecar"}, changed)
	mine, _, _ := InPlaceUpdateStates(next)
	assert.Equal(t, "v1-id", mine["test-sidecarset"].LastContainerStatuses["test-sidecar"].ImageID)
	theirs, _, _ := InPlaceUpdateStates(pod)
	assert.Equal(t, "v0-id", theirs["test-sidecarset"].LastContainerStatuses["test-sidecar"].ImageID, "the pod's own record, untouched")

	c := newMemo(func(raw string) map[string]UpgradeSpec {
		specs, _ := v1beta1.ParseUpgradeSpecs(raw)
		return specs
	})
	c.max = 2
	for _, raw := range []string{`{"a":"1"}`, `{"b":"2"}`, `{"c":"3"}`, `{"a":"1"}`, "not json"} {
		want, _ := v1beta1.ParseUpgradeSpecs(raw)
		assert.Equal(t, want, c.get(raw), raw)
		assert.LessOrEqual(t, len(c.m), 2)
	}
}
