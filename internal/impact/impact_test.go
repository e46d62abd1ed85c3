package impact

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func pod(ns, name string, labels map[string]string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Status: corev1.PodStatus{Phase: phase}}
}

func sidecarSet(sel, nsSel *metav1.LabelSelector, containers ...corev1.Container) *v1beta1.SidecarSet {
	ss := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "mesh"}}
	ss.Spec.Selector, ss.Spec.NamespaceSelector = sel, nsSel
	for _, c := range containers {
		ss.Spec.Containers = append(ss.Spec.Containers, v1beta1.SidecarContainer{Container: c})
	}
	return ss
}

func TestOf(t *testing.T) {
	namespaces := []*corev1.Namespace{
		namespace("team-a", map[string]string{"team": "a"}),
		namespace("team-b", map[string]string{"team": "b", "pod-security.kubernetes.io/enforce": "restricted"}),
		namespace("kube-system", nil),
	}
	census := NewCensus()
	for _, p := range []*corev1.Pod{
		pod("team-a", "web-1", map[string]string{"app": "web"}, corev1.PodRunning),
		pod("team-a", "web-2", map[string]string{"app": "web"}, corev1.PodPending),
		pod("team-a", "done", map[string]string{"app": "web"}, corev1.PodSucceeded),
		pod("team-a", "db", map[string]string{"app": "db"}, corev1.PodRunning),
		pod("team-b", "web-1", map[string]string{"app": "web", "tier": "x"}, corev1.PodRunning),
	} {
		census.OnAdd(p, true)
	}
	web := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	privileged := corev1.Container{Name: "proxy", Image: "envoy", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}
	plain := corev1.Container{Name: "proxy", Image: "envoy", SecurityContext: &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}

	for _, tc := range []struct {
		name      string
		ss        *v1beta1.SidecarSet
		all       bool
		pods      map[string]int
		total     int
		violating map[string][]string // namespace → checks failed
	}{
		{name: "no namespace scope selects every namespace", ss: sidecarSet(web, nil, plain), all: true,
			pods: map[string]int{"team-a": 2, "team-b": 1, "kube-system": 0}, total: 3},
		{name: "a namespace selector narrows it", ss: sidecarSet(web, &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}, plain),
			pods: map[string]int{"team-a": 2}, total: 2},
		{name: "the name label every namespace carries", ss: sidecarSet(web, &metav1.LabelSelector{MatchLabels: map[string]string{v1beta1.NamespaceNameLabel: "kube-system"}}, plain),
			pods: map[string]int{"kube-system": 0}, total: 0},
		{name: "an empty selector selects no pod", ss: sidecarSet(&metav1.LabelSelector{}, nil, plain), all: true,
			pods: map[string]int{"team-a": 0, "team-b": 0, "kube-system": 0}},
		{name: "a privileged sidecar fails restricted only where it is enforced", ss: sidecarSet(web, nil, privileged), all: true,
			pods: map[string]int{"team-a": 2, "team-b": 1, "kube-system": 0}, total: 3,
			// restricted also wants allowPrivilegeEscalation false and every capability dropped,
			// which the privileged sidecar leaves unset; baseline (team-a's default is privileged) is not asked.
			violating: map[string][]string{"team-b": {"privileged", "allowPrivilegeEscalation != false", "unrestricted capabilities"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Of(tc.ss, namespaces, census)
			require.NoError(t, err)
			assert.Equal(t, tc.all, v.AllNamespaces)
			assert.Equal(t, tc.total, v.Pods)
			got := map[string]int{}
			violating := map[string][]string{}
			for name, ns := range v.Namespaces {
				got[name] = ns.Pods
				assert.Equal(t, name, ns.Labels[v1beta1.NamespaceNameLabel])
				for _, vi := range ns.PodSecurity.Violations {
					violating[name] = append(violating[name], vi.Check)
				}
			}
			assert.Equal(t, tc.pods, got)
			if tc.violating == nil {
				tc.violating = map[string][]string{}
			}
			assert.Equal(t, tc.violating, violating)
		})
	}
}

func TestOfRefusesAnInvalidSelector(t *testing.T) {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}
	_, err := Of(sidecarSet(bad, nil), nil, Static{})
	assert.ErrorContains(t, err, "spec.selector")
	_, err = Of(sidecarSet(&metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}, bad), nil, Static{})
	assert.ErrorContains(t, err, "spec.namespaceSelector")
}

func TestCensusFollowsEvents(t *testing.T) {
	c := NewCensus()
	web := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	count := func() int {
		v, err := Of(sidecarSet(web, nil), []*corev1.Namespace{namespace("ns", nil)}, c)
		require.NoError(t, err)
		return v.Pods
	}
	a := pod("ns", "a", map[string]string{"app": "web"}, corev1.PodRunning)
	c.OnAdd(a, false)
	assert.Equal(t, 1, count())
	relabelled := pod("ns", "a", map[string]string{"app": "db"}, corev1.PodRunning)
	c.OnUpdate(a, relabelled)
	assert.Equal(t, 0, count())
	back := pod("ns", "a", map[string]string{"app": "web"}, corev1.PodRunning)
	c.OnUpdate(relabelled, back)
	assert.Equal(t, 1, count())
	finished := pod("ns", "a", map[string]string{"app": "web"}, corev1.PodFailed)
	c.OnUpdate(back, finished)
	assert.Equal(t, 0, count(), "a finished pod is not counted")
	c.OnUpdate(finished, back)
	c.OnDelete(toolscacheTombstone(back))
	assert.Equal(t, 0, count())
	assert.Empty(t, c.namespaces, "nothing is kept of what no pod has")
}

func TestWorsened(t *testing.T) {
	restricted := map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}
	compliant := corev1.Container{Name: "app", Image: "app", SecurityContext: &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}
	before := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{compliant}}}
	privileged := corev1.Container{Name: "proxy", Image: "envoy", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}
	bad := sidecarSet(nil, nil, privileged)
	bad.Name = "bad"
	good := sidecarSet(nil, nil, compliant)
	good.Name = "good"
	after := before.DeepCopy()
	after.Spec.Containers = append(after.Spec.Containers, privileged)

	f := Worsened(restricted, before, after, []*v1beta1.SidecarSet{good, bad})
	require.NotNil(t, f)
	assert.Equal(t, []string{"bad"}, f.SidecarSets, "the SidecarSet whose sidecars fail on their own")
	assert.Contains(t, f.String(), `SidecarSet bad makes the pod violate PodSecurity "restricted:latest": privileged (container "proxy"`)

	assert.Nil(t, Worsened(nil, before, after, []*v1beta1.SidecarSet{bad}), "privileged namespaces enforce nothing")
	assert.Nil(t, Worsened(restricted, after, after, []*v1beta1.SidecarSet{bad}), "a pod that failed already was not made to")
	assert.Nil(t, Worsened(restricted, before, before, []*v1beta1.SidecarSet{good}), "a pod that still passes")
}

func toolscacheTombstone(p *corev1.Pod) any {
	return toolscache.DeletedFinalStateUnknown{Key: p.Namespace + "/" + p.Name, Obj: p}
}
