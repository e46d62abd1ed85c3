package rollout

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

// apply plays the controller: it applies a plan to the stored revisions.
func apply(store map[string]*appsv1.ControllerRevision, p RevisionPlan) {
	store[p.Latest.Name] = p.Latest
	if p.SetCustomVersion != "" {
		p.Latest.Labels[v1beta1.SidecarSetCustomVersionLabel] = p.SetCustomVersion
	}
	for _, n := range p.Delete {
		delete(store, n)
	}
}

func list(store map[string]*appsv1.ControllerRevision) []*appsv1.ControllerRevision {
	var out []*appsv1.ControllerRevision
	for _, cr := range store {
		out = append(out, cr)
	}
	return out
}

func TestRevisionVector(t *testing.T) {
	ss := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "sidecarset-test", Labels: map[string]string{"team": "a"}},
		Spec: v1beta1.SidecarSetSpec{Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "dns-f", Image: "dns:1.0"}}}}}
	require.NoError(t, defaults.SidecarSetAndHash(ss))
	p, err := PlanRevisions(ss, nil, nil, "kruise-system", 0)
	require.NoError(t, err)
	assert.Equal(t, RevisionCreate, p.Action)
	assert.Equal(t, "sidecarset-test-788d67c95d", p.Latest.Name)
	assert.Equal(t, "788d67c95d", p.Latest.Labels[v1beta1.ControllerRevisionHashLabel])
	assert.Equal(t, "sidecarset-test", p.Latest.Labels[v1beta1.SidecarSetNameLabel])
	assert.Equal(t, "a", p.Latest.Labels["team"])
	assert.Equal(t, ss.Annotations[v1beta1.SidecarSetHashAnnotation], p.Latest.Annotations[v1beta1.SidecarSetHashAnnotation])
	assert.Equal(t, "kruise-system", p.Latest.Namespace)
	assert.Equal(t, int64(1), p.Latest.Revision)
	require.Len(t, p.Latest.OwnerReferences, 1)
	assert.True(t, *p.Latest.OwnerReferences[0].Controller)
	assert.Equal(t, "SidecarSet", p.Latest.OwnerReferences[0].Kind)

	p1, _ := PlanRevisions(ss, nil, nil, "kruise-system", 1)
	assert.NotEqual(t, p.Latest.Name, p1.Latest.Name, "collisionCount changes the name")
}

// TestRevisionsC10 restates C10: first registration is revision 1; a spec change gives 2 (stable
// over repeats, recording the four fields); reverting renumbers the first to 3; 100 image changes
// leave exactly revisionHistoryLimit revisions.
func TestRevisionsC10(t *testing.T) {
	ss := ssC13()
	ss.Spec.RevisionHistoryLimit = func(v int32) *int32 { return &v }(10)
	store := map[string]*appsv1.ControllerRevision{}
	reconcile := func() RevisionPlan {
		p, err := PlanRevisions(ss, list(store), nil, "kruise-system", 0)
		require.NoError(t, err)
		apply(store, p)
		return p
	}
	p := reconcile()
	assert.Equal(t, int64(1), p.Latest.Revision)
	first := p.Latest.Name

	orig := ss.DeepCopy()
	ss.Spec.InitContainers = []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "init", Image: "busybox"}}}
	ss.Spec.Volumes = []corev1.Volume{{Name: "v"}}
	ss.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "s"}}
	for i := 0; i < 5; i++ {
		p = reconcile()
		assert.Equal(t, int64(2), p.Latest.Revision)
	}
	for _, k := range []string{`"volumes":[`, `"containers":[`, `"initContainers":[`, `"imagePullSecrets":[`} {
		assert.Contains(t, string(p.Latest.Data.Raw), k)
	}

	ss = orig
	p = reconcile()
	assert.Equal(t, RevisionRenumber, p.Action)
	assert.Equal(t, first, p.Latest.Name)
	for i := 0; i < 5; i++ {
		p = reconcile()
		assert.Equal(t, int64(3), p.Latest.Revision)
		assert.Equal(t, RevisionReuse, p.Action)
	}
	assert.Len(t, store, 2)

	for i := 0; i < 100; i++ {
		ss.Spec.Containers[0].Image = fmt.Sprintf("test-image:%d", i)
		p = reconcile()
		assert.NoError(t, p.TruncateErr)
		assert.Contains(t, store, p.Latest.Name, "the latest revision is never deleted")
	}
	assert.Len(t, store, 10)
}

// TestTruncationC12: 15 revisions sidecar-1..15, limit 10, 100 pods recording revisions 1..k.
func TestTruncationC12(t *testing.T) {
	ss := ssC13()
	ss.Name = "sidecar"
	mkRevs := func() []*appsv1.ControllerRevision {
		var out []*appsv1.ControllerRevision
		for i := 1; i <= 15; i++ {
			out = append(out, &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sidecar-%d", i)},
				Revision: int64(i), Data: runtimeRaw(fmt.Sprintf(`{"r":%d}`, i))})
		}
		return out
	}
	mkPods := func(k int) []*corev1.Pod {
		var pods []*corev1.Pod
		for i := 0; i < 100; i++ {
			pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
				v1beta1.SidecarSetHashAnnotation: fmt.Sprintf(`{"sidecar":{"hash":"h","controllerRevision":"sidecar-%d"}}`, i%k+1)}}})
		}
		return pods
	}
	for _, tc := range []struct {
		k      int
		actual int // 0 = success
	}{{1, 0}, {5, 0}, {9, 0}, {10, 11}, {11, 12}, {14, 15}, {15, 15}, {20, 15}} {
		revs := mkRevs()
		del, err := truncate(ss, revs, mkPods(tc.k))
		if tc.actual == 0 {
			assert.NoError(t, err, "k=%d", tc.k)
			assert.Len(t, del, 5)
		} else {
			assert.EqualError(t, err, fmt.Sprintf("failed to limit the number of stored revisions, limited: 10, actual: %d, name: sidecar", tc.actual), "k=%d", tc.k)
		}
	}
	del, err := truncate(ss, mkRevs(), mkPods(8))
	require.NoError(t, err)
	assert.Equal(t, []string{"sidecar-9", "sidecar-10", "sidecar-11", "sidecar-12", "sidecar-13"}, del)
}

func TestActiveRevisionsFromInjectionStrategy(t *testing.T) {
	ss := ssC13()
	name, cv := "r-2", "v1"
	ss.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{RevisionName: &name, CustomVersion: &cv}
	revs := []*appsv1.ControllerRevision{
		{ObjectMeta: metav1.ObjectMeta{Name: "r-3", Labels: map[string]string{v1beta1.SidecarSetCustomVersionLabel: "v1"}}, Revision: 3},
		{ObjectMeta: metav1.ObjectMeta{Name: "r-1", Labels: map[string]string{v1beta1.SidecarSetCustomVersionLabel: "v1"}}, Revision: 1},
	}
	assert.Equal(t, map[string]bool{"r-2": true, "r-3": true}, ActiveRevisions(ss, revs, nil))

	one := int32(0)
	ss.Spec.RevisionHistoryLimit = &one // min effective 1
	del, err := truncate(ss, []*appsv1.ControllerRevision{revs[1], {ObjectMeta: metav1.ObjectMeta{Name: "r-2"}, Revision: 2}, revs[0]}, nil)
	assert.Equal(t, []string{"r-1"}, del)
	assert.EqualError(t, err, "failed to limit the number of stored revisions, limited: 1, actual: 2, name: test-sidecarset")
}

func TestCustomVersionLabel(t *testing.T) {
	ss := ssC13()
	p, err := PlanRevisions(ss, nil, nil, "ns", 0)
	require.NoError(t, err)
	ss.Spec.CustomVersion = "v7"
	p2, err := PlanRevisions(ss, []*appsv1.ControllerRevision{p.Latest}, nil, "ns", 0)
	require.NoError(t, err)
	assert.Equal(t, RevisionReuse, p2.Action, "labels are not part of data.raw")
	assert.Equal(t, "v7", p2.SetCustomVersion)
	_, err = PlanRevisions(nil, nil, nil, "ns", 0)
	assert.Error(t, err)
}

// Issue 35 item 2: a spec.customVersion stored before it was validated as a label value is put
// on no revision (the API server would refuse it, and the controller retried without end); the
// plan says so instead, and the revision is recorded and reused as usual.
func TestCustomVersionThatIsNoLabelValue(t *testing.T) {
	ss := ssC13()
	ss.Spec.CustomVersion = "not a label value!"
	p, err := PlanRevisions(ss, nil, nil, "ns", 0)
	require.NoError(t, err)
	assert.Equal(t, RevisionCreate, p.Action)
	assert.NotContains(t, p.Latest.Labels, v1beta1.SidecarSetCustomVersionLabel)
	assert.Empty(t, p.SetCustomVersion)
	assert.Contains(t, p.CustomVersionWarning, `spec.customVersion "not a label value!" is no label value`)
	assert.Contains(t, p.CustomVersionWarning, p.Latest.Name)

	p2, err := PlanRevisions(ss, []*appsv1.ControllerRevision{p.Latest}, nil, "ns", 0)
	require.NoError(t, err)
	assert.Equal(t, RevisionReuse, p2.Action)
	assert.Empty(t, p2.SetCustomVersion, "no patch of a label the API server refuses")

	ss.Spec.CustomVersion = "v1"
	p3, err := PlanRevisions(ss, []*appsv1.ControllerRevision{p.Latest}, nil, "ns", 0)
	require.NoError(t, err)
	assert.Empty(t, p3.CustomVersionWarning)
	assert.Equal(t, "v1", p3.SetCustomVersion, "once fixed, the revision is labelled")
}
