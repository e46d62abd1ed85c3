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

// kubelet plays the kubelet after an in-place update: every container status reports its spec
// image, with an imageID derived from it.
func kubelet(p *corev1.Pod) {
	for i := range p.Spec.Containers {
		for j := range p.Status.ContainerStatuses {
			if cs := &p.Status.ContainerStatuses[j]; cs.Name == p.Spec.Containers[i].Name {
				cs.Image, cs.ImageID = p.Spec.Containers[i].Image, p.Spec.Containers[i].Image+"-id"
			}
		}
	}
}

type counts struct{ matched, updated, ready, updatedReady int32 }

func statusCounts(ss *v1beta1.SidecarSet, pods []*corev1.Pod) counts {
	st := Status(ss, pods, "", 0)
	return counts{st.MatchedPods, st.UpdatedPods, st.ReadyPods, st.UpdatedReadyPods}
}

// round runs one reconcile of the pure core over pods the way the controller does: status is
// computed before acting, then resets or upgrades replace the pods they change.
func round(t *testing.T, ss *v1beta1.SidecarSet, pods []*corev1.Pod) (counts, []string) {
	t.Helper()
	before := statusCounts(ss, pods)
	r := NextRound(ss, pods)
	act := r.Plan.Upgrade
	apply := Upgrade
	if len(r.Reset) > 0 {
		act, apply = r.Reset, Reset
	}
	var touched []string
	for _, target := range act {
		for i, p := range pods {
			if p == target {
				next, _, err := apply(p, ss, t0)
				require.NoError(t, err)
				pods[i] = next
				touched = append(touched, p.Name)
			}
		}
	}
	return before, touched
}

func container(p *corev1.Pod, name string) corev1.Container {
	c := podContainer(p, name)
	if c == nil {
		return corev1.Container{}
	}
	return *c
}

// C6: the cold upgrade sequence of OpenKruise's controller test, two pods, maxUnavailable 1.
func TestColdUpgradeSequenceC6(t *testing.T) {
	ss := &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "test-sidecarset", Annotations: map[string]string{v1beta1.SidecarSetHashAnnotation: "bbb"}},
		Spec:       v1beta1.SidecarSetSpec{Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "test-sidecar", Image: "test-image:v2"}}}},
	}
	pd := func(name string) *corev1.Pod {
		p := podC13(0)
		p.Name = name
		delete(p.Annotations, v1beta1.SidecarSetHashWithoutImageAnnotation) // Pd has none, nor has SSd: equal
		p.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "nginx-env", Value: "value-1"}, {Name: "IS_INJECTED", Value: "true"}}
		p.Spec.Containers[1].VolumeMounts = []corev1.VolumeMount{{Name: "nginx-volume", MountPath: "/data/nginx"}}
		return p
	}
	pods := []*corev1.Pod{pd("test-pod-1"), pd("test-pod-2")}

	st, touched := round(t, ss, pods)
	assert.Equal(t, counts{2, 0, 2, 0}, st)
	assert.Equal(t, []string{"test-pod-1"}, touched)
	c := container(pods[0], "test-sidecar")
	assert.Equal(t, "test-image:v2", c.Image)
	assert.Equal(t, pd("x").Spec.Containers[1].Env, c.Env, "only the image changes")
	assert.Equal(t, pd("x").Spec.Containers[1].VolumeMounts, c.VolumeMounts, "only the image changes")
	assert.Equal(t, "test-sidecarset", pods[0].Annotations[v1beta1.SidecarSetListAnnotation])
	assert.Equal(t, "test-image:v1", container(pods[1], "test-sidecar").Image)

	// The kubelet has not restarted pod-1's sidecar: the in-flight pod uses the only slot.
	st, touched = round(t, ss, pods)
	assert.Equal(t, counts{2, 1, 1, 0}, st)
	assert.Empty(t, touched)

	kubelet(pods[0])
	st, touched = round(t, ss, pods)
	assert.Equal(t, counts{2, 1, 2, 1}, st)
	assert.Equal(t, []string{"test-pod-2"}, touched)

	st, touched = round(t, ss, pods)
	assert.Equal(t, counts{2, 2, 1, 1}, st)
	assert.Empty(t, touched)

	kubelet(pods[1])
	st, _ = round(t, ss, pods)
	assert.Equal(t, counts{2, 2, 2, 2}, st)
}

// C5: a pod already on the hash is left alone; Upgrade of a pod whose image already matches only
// rewrites the hash entry.
func TestUpgradeWithoutImageChangeC5(t *testing.T) {
	ss := ssC13()
	p := podC13(0)
	p.Annotations[v1beta1.SidecarSetHashAnnotation] = hashAnn("test-sidecarset", "bbb")
	r := NextRound(ss, []*corev1.Pod{p})
	assert.Empty(t, r.Plan.Upgrade)
	assert.Equal(t, []*corev1.Pod{p}, r.Plan.Updated)

	p = podC13(0)
	p.Spec.Containers[1].Image = "test-image:v2"
	out, changed, err := Upgrade(p, ss, t0)
	require.NoError(t, err)
	assert.Empty(t, changed)
	assert.Equal(t, "bbb", PodHash(out, "test-sidecarset"))
	assert.Equal(t, "aaa", PodHash(p, "test-sidecarset"), "the input pod is not modified")
}

func hotSidecarSet() *v1beta1.SidecarSet {
	return &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "test-sidecarset", ResourceVersion: "22", Annotations: map[string]string{
			v1beta1.SidecarSetHashAnnotation:             "bbb",
			v1beta1.SidecarSetHashWithoutImageAnnotation: "without-aaa",
		}},
		Spec: v1beta1.SidecarSetSpec{Containers: []v1beta1.SidecarContainer{{
			Container: corev1.Container{Name: "test-sidecar", Image: "test-image:v2"},
			UpgradeStrategy: v1beta1.SidecarContainerUpgradeStrategy{
				UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "hotupgrade:empty",
			},
		}}},
	}
}

// hotPod is the C19 pod as the webhook injects it: -1 working on v1, -2 idle on the empty image.
func hotPod() *corev1.Pod {
	p := podC13(0)
	p.Annotations[v1beta1.SidecarSetWorkingHotUpgradeContainer] = `{"test-sidecar":"test-sidecar-1"}`
	p.Annotations[v1beta1.SidecarSetVersionAnnotationPrefix+"test-sidecar-1"] = "1"
	p.Annotations[v1beta1.SidecarSetVersionAltAnnotationPrefix+"test-sidecar-1"] = "0"
	p.Annotations[v1beta1.SidecarSetVersionAnnotationPrefix+"test-sidecar-2"] = "0"
	p.Annotations[v1beta1.SidecarSetVersionAltAnnotationPrefix+"test-sidecar-2"] = "1"
	p.Spec.Containers = []corev1.Container{
		{Name: "nginx", Image: "nginx:1"},
		{Name: "test-sidecar-1", Image: "test-image:v1"},
		{Name: "test-sidecar-2", Image: "hotupgrade:empty"},
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "nginx", Ready: true},
		{Name: "test-sidecar-1", Ready: true},
		{Name: "test-sidecar-2", Ready: true},
	}
	kubelet(p)
	return p
}

func versions(p *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, n := range []string{"test-sidecar-1", "test-sidecar-2"} {
		out["version/"+n] = p.Annotations[v1beta1.SidecarSetVersionAnnotationPrefix+n]
		out["versionalt/"+n] = p.Annotations[v1beta1.SidecarSetVersionAltAnnotationPrefix+n]
	}
	return out
}

// C19: the hot upgrade sequence of OpenKruise's controller test, then the roles swapped back.
func TestHotUpgradeSequenceC19(t *testing.T) {
	ss := hotSidecarSet()
	pods := []*corev1.Pod{hotPod()}

	st, touched := round(t, ss, pods)
	assert.Equal(t, counts{1, 0, 1, 0}, st)
	assert.Equal(t, []string{"pod-0"}, touched)
	p := pods[0]
	assert.Equal(t, "test-image:v1", container(p, "test-sidecar-1").Image)
	assert.Equal(t, "test-image:v2", container(p, "test-sidecar-2").Image)
	assert.Equal(t, `{"test-sidecar":"test-sidecar-2"}`, p.Annotations[v1beta1.SidecarSetWorkingHotUpgradeContainer])
	assert.Equal(t, map[string]string{
		"version/test-sidecar-2": "22", "versionalt/test-sidecar-2": "1", // new twin: the SidecarSet's resourceVersion; alt: the old twin's
		"version/test-sidecar-1": "1", "versionalt/test-sidecar-1": "22",
	}, versions(p))

	// The kubelet has not restarted -2: nothing happens.
	st, touched = round(t, ss, pods)
	assert.Equal(t, counts{1, 1, 0, 0}, st)
	assert.Empty(t, touched)

	kubelet(pods[0])
	st, touched = round(t, ss, pods)
	assert.Equal(t, counts{1, 1, 0, 0}, st)
	assert.Equal(t, []string{"pod-0"}, touched, "-1 is reset")
	p = pods[0]
	assert.Equal(t, "hotupgrade:empty", container(p, "test-sidecar-1").Image)
	assert.Equal(t, "test-image:v2", container(p, "test-sidecar-2").Image)
	assert.Equal(t, map[string]string{
		"version/test-sidecar-2": "22", "versionalt/test-sidecar-2": "0",
		"version/test-sidecar-1": "0", "versionalt/test-sidecar-1": "22",
	}, versions(p))

	kubelet(pods[0])
	st, touched = round(t, ss, pods)
	assert.Equal(t, counts{1, 1, 1, 1}, st)
	assert.Empty(t, touched)

	// A second upgrade goes back to -1, the idle twin now.
	ss.Spec.Containers[0].Image = "test-image:v3"
	ss.Annotations[v1beta1.SidecarSetHashAnnotation] = "ccc"
	ss.ResourceVersion = "30"
	_, touched = round(t, ss, pods)
	assert.Equal(t, []string{"pod-0"}, touched)
	p = pods[0]
	assert.Equal(t, "test-image:v3", container(p, "test-sidecar-1").Image)
	assert.Equal(t, `{"test-sidecar":"test-sidecar-1"}`, p.Annotations[v1beta1.SidecarSetWorkingHotUpgradeContainer])
	assert.Equal(t, "30", p.Annotations[v1beta1.SidecarSetVersionAnnotationPrefix+"test-sidecar-1"])
	assert.Equal(t, "22", p.Annotations[v1beta1.SidecarSetVersionAltAnnotationPrefix+"test-sidecar-1"])
	kubelet(p)
	_, touched = round(t, ss, pods)
	assert.Equal(t, []string{"pod-0"}, touched)
	assert.Equal(t, "hotupgrade:empty", container(pods[0], "test-sidecar-2").Image)
	kubelet(pods[0])
	st, _ = round(t, ss, pods)
	assert.Equal(t, counts{1, 1, 1, 1}, st)
}

func TestHotUpgradeTarget(t *testing.T) {
	ss := hotSidecarSet()
	sc := &ss.Spec.Containers[0]
	for _, tc := range []struct {
		name          string
		edit          func(*corev1.Pod)
		target, other string
	}{
		{"the twin on the empty image", func(*corev1.Pod) {}, "test-sidecar-2", "test-sidecar-1"},
		{"empty -1 wins even when -2 works", func(p *corev1.Pod) {
			p.Spec.Containers[1].Image, p.Spec.Containers[2].Image = "hotupgrade:empty", "test-image:v1"
			p.Annotations[v1beta1.SidecarSetWorkingHotUpgradeContainer] = `{"test-sidecar":"test-sidecar-2"}`
		}, "test-sidecar-1", "test-sidecar-2"},
		{"the not-ready twin when the other is ready", func(p *corev1.Pod) {
			p.Spec.Containers[2].Image = "test-image:v0"
			kubelet(p)
			p.Status.ContainerStatuses[1].Ready = false
		}, "test-sidecar-1", "test-sidecar-2"},
		{"both ready: the non-working twin", func(p *corev1.Pod) {
			p.Spec.Containers[2].Image = "test-image:v0"
			kubelet(p)
		}, "test-sidecar-2", "test-sidecar-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := hotPod()
			tc.edit(p)
			target, other := HotUpgradeTarget(p, ss, sc)
			assert.Equal(t, tc.target, target)
			assert.Equal(t, tc.other, other)
		})
	}
}

func TestUpgradeRecordsStateAndPatchesMetadata(t *testing.T) {
	ss := ssC13()
	ss.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{
		Annotations: map[string]string{"example.com/sidecar": "v2"}, PatchPolicy: v1beta1.SidecarSetOverwritePatchPolicy,
	}}
	p := podC13(0)
	p.Annotations["example.com/sidecar"] = "v1"
	p.Annotations[v1beta1.SidecarSetInplaceUpdateStateAnnotation] =
		`{"other":{"revision":"x","updateTimestamp":null,"lastContainerStatuses":{"o":{"imageID":"o-id"}}}}`
	out, changed, err := Upgrade(p, ss, t0)
	require.NoError(t, err)
	assert.Equal(t, []string{"test-sidecar"}, changed)
	assert.Equal(t, "v2", out.Annotations["example.com/sidecar"])
	states, _, ok := InPlaceUpdateStates(out)
	require.True(t, ok)
	assert.Equal(t, "x", states["other"].Revision, "other SidecarSets' records survive")
	mine := states["test-sidecarset"]
	assert.Equal(t, "bbb", mine.Revision, "the revision is the SidecarSet hash at the first record")
	assert.True(t, mine.UpdateTimestamp.Equal(&metav1.Time{Time: t0}))
	assert.Equal(t, map[string]InPlaceUpdateContainerStatus{"test-sidecar": {ImageID: "v1-id"}}, mine.LastContainerStatuses,
		"the imageID before the update, which consistency compares against")
	var hashes map[string]UpgradeSpec
	require.NoError(t, json.Unmarshal([]byte(out.Annotations[v1beta1.SidecarSetHashAnnotation]), &hashes))
	assert.Equal(t, "bbb", hashes["test-sidecarset"].Hash)

	p.Annotations[v1beta1.SidecarSetInplaceUpdateStateAnnotation] = "{not json"
	_, _, err = Upgrade(p, ss, t0)
	assert.ErrorContains(t, err, "not valid JSON")

	p = podC13(0)
	p.Spec.Containers = p.Spec.Containers[:1]
	_, _, err = Upgrade(p, ss, t0)
	assert.ErrorContains(t, err, `no container "test-sidecar"`)
}

func TestNextRoundStops(t *testing.T) {
	ss := hotSidecarSet()
	p := hotPod()
	p, _, err := Upgrade(p, ss, t0)
	require.NoError(t, err)
	kubelet(p)
	other := hotPod()
	other.Name = "pod-1"
	r := NextRound(ss, []*corev1.Pod{p, other})
	assert.Equal(t, []*corev1.Pod{p}, r.Reset)
	assert.Equal(t, StoppedResetting, r.Plan.Stopped)
	assert.Empty(t, r.Plan.Upgrade, "a reset round upgrades nothing")
	assert.Equal(t, []*corev1.Pod{other}, r.Plan.HeldByMaxUnavailable)

	ss.Spec.UpdateStrategy.Paused = true
	r = NextRound(ss, []*corev1.Pod{p, other})
	assert.Empty(t, r.Reset, "paused stops resets too")
	assert.Equal(t, StoppedPaused, r.Plan.Stopped)
}
