package history

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

func constRand(v float64) func() float64 { return func() float64 { return v } }

func podWithLabels(l map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: l},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
}

// W6: SS1 with customVersion sidecarset1-12345 (Always); the revision replaces the spec with
// initContainers [init-2] and containers [dns-f] ⇒ the historical spec is injected (1 init + 1
// container), not the latest (2 + 2).
func TestForInjectionW6(t *testing.T) {
	old := ss1()
	old.Spec.InitContainers = old.Spec.InitContainers[:1]
	old.Spec.Containers = old.Spec.Containers[:1]
	cr := revisionOf(t, old, 1, "sidecarset1-12345")

	cur := ss1()
	cur.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{
		CustomVersion: strp("sidecarset1-12345"), Policy: v1beta1.AlwaysSidecarSetInjectRevisionPolicy,
	}
	got, err := ForInjection(cur, podWithLabels(map[string]string{"app": "suxing-test"}), NewStaticSource(cr), constRand(0.5))
	require.NoError(t, err)
	require.NotSame(t, cur, got)
	assert.Len(t, got.Spec.InitContainers, 1)
	assert.Len(t, got.Spec.Containers, 1)
	assert.Equal(t, "init-2", got.Spec.InitContainers[0].Name)
	assert.Equal(t, "dns-f", got.Spec.Containers[0].Name)
	assert.Equal(t, cr.Name, got.Status.LatestRevision)
	assert.Len(t, cur.Spec.Containers, 2, "the latest SidecarSet is not modified")
}

// canarySet is the W7–W14 fixture: latest image sidecar-image:canary, revision X = stable.
func canarySet(t *testing.T) (*v1beta1.SidecarSet, Source) {
	t.Helper()
	base := &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "sidecarset1"},
		Spec: v1beta1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "demo"}},
			Containers: []v1beta1.SidecarContainer{sc("sidecar", "sidecar-image:stable")},
		},
	}
	cr := revisionOf(t, base, 1, "X")
	latest := base.DeepCopy()
	latest.Spec.Containers[0].Image = "sidecar-image:canary"
	latest.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
	latest.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{
		CustomVersion: strp("X"), Policy: v1beta1.PartialSidecarSetInjectRevisionPolicy,
	}
	return latest, NewStaticSource(cr)
}

func TestForInjectionCanary(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(i int32) *intstr.IntOrString { v := intstr.FromInt32(i); return &v }
	canary := map[string]string{"app": "demo", "canary": "true"}
	plain := map[string]string{"app": "demo"}

	tests := []struct {
		id        string
		labels    map[string]string
		partition *intstr.IntOrString
		paused    bool
		selector  *metav1.LabelSelector // overrides the canary=true update selector
		policy    v1beta1.SidecarSetInjectRevisionPolicy
		noRev     bool // revision X absent
		rand      float64
		want      string // image, or "" when an error is expected
		wantErr   []string
	}{
		{id: "W7 pod outside the update selector gets the revision", labels: plain, rand: 0.5, want: "sidecar-image:stable"},
		{id: "W8 canary pod, no partition gets the latest", labels: canary, rand: 0.5, want: "sidecar-image:canary"},
		{id: "W9 canary pod, partition 100% gets the revision", labels: canary, partition: pct("100%"), rand: 0.999999, want: "sidecar-image:stable"},
		{id: "W10 canary pod, partition 0% gets the latest", labels: canary, partition: pct("0%"), rand: 0.5, want: "sidecar-image:canary"},
		{id: "W11 partition abc% is an error", labels: canary, partition: pct("abc%"), rand: 0.5,
			wantErr: []string{`sidecarset "sidecarset1"`, "updateStrategy.partition", `"abc%"`}},
		{id: "W12 revision X missing is an error", labels: canary, noRev: true, rand: 0.5,
			wantErr: []string{`sidecarset "sidecarset1"`, "customVersion", "=X"}},
		{id: "W12 revision X missing is an error even for Always", labels: canary, noRev: true, policy: v1beta1.AlwaysSidecarSetInjectRevisionPolicy,
			rand: 0.5, wantErr: []string{`sidecarset "sidecarset1"`}},
		{id: "W13 bad update selector operator is an error", labels: canary, rand: 0.5,
			selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "canary", Operator: "badOp", Values: []string{"true"}}}},
			wantErr:  []string{`sidecarset "sidecarset1"`, "updateStrategy.selector", "badOp"}},
		{id: "W14 paused wins over partition 0%", labels: canary, partition: pct("0%"), paused: true, rand: 0.5, want: "sidecar-image:stable"},

		// Step 4 details.
		{id: "integer partition gets the latest", labels: canary, partition: num(5), rand: 0, want: "sidecar-image:canary"},
		{id: "50% with rand below gets the revision", labels: canary, partition: pct("50%"), rand: 0.3, want: "sidecar-image:stable"},
		{id: "50% with rand equal gets the revision (<=)", labels: canary, partition: pct("50%"), rand: 0.5, want: "sidecar-image:stable"},
		{id: "50% with rand above gets the latest", labels: canary, partition: pct("50%"), rand: 0.7, want: "sidecar-image:canary"},
		{id: "quirk: 0% with rand exactly 0 gets the revision", labels: canary, partition: pct("0%"), rand: 0, want: "sidecar-image:stable"},
		{id: "fractional percentage", labels: canary, partition: pct("12.5%"), rand: 0.125, want: "sidecar-image:stable"},
		{id: "percentage without % is an error", labels: canary, partition: pct("50"), rand: 0.5, wantErr: []string{"updateStrategy.partition"}},
		{id: "no update selector: every pod is random", labels: plain, partition: pct("0%"), rand: 0.5,
			selector: &metav1.LabelSelector{}, want: "sidecar-image:canary"},
		{id: "a bad selector is only parsed for Partial", labels: canary, policy: v1beta1.AlwaysSidecarSetInjectRevisionPolicy, rand: 0.5,
			selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "canary", Operator: "badOp"}}},
			want:     "sidecar-image:stable"},

		// Step 5.
		{id: "quirk Q22: Always ignores the update selector", labels: canary, policy: v1beta1.AlwaysSidecarSetInjectRevisionPolicy, rand: 0.9, want: "sidecar-image:stable"},
		{id: "empty policy behaves as Always", labels: canary, policy: "-", rand: 0.9, want: "sidecar-image:stable"},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			ss, src := canarySet(t)
			if tc.noRev {
				src = NewStaticSource()
			}
			ss.Spec.UpdateStrategy.Partition = tc.partition
			ss.Spec.UpdateStrategy.Paused = tc.paused
			if tc.selector != nil {
				ss.Spec.UpdateStrategy.Selector = tc.selector
				if len(tc.selector.MatchLabels)+len(tc.selector.MatchExpressions) == 0 {
					ss.Spec.UpdateStrategy.Selector = nil
				}
			}
			switch tc.policy {
			case "":
			case "-":
				ss.Spec.InjectionStrategy.Revision.Policy = ""
			default:
				ss.Spec.InjectionStrategy.Revision.Policy = tc.policy
			}
			calls := 0
			rnd := func() float64 { calls++; return tc.rand }
			got, err := ForInjection(ss, podWithLabels(tc.labels), src, rnd)
			if tc.wantErr != nil {
				require.Error(t, err)
				for _, s := range tc.wantErr {
					assert.Contains(t, err.Error(), s)
				}
				return
			}
			require.NoError(t, err)
			require.Len(t, got.Spec.Containers, 1)
			assert.Equal(t, tc.want, got.Spec.Containers[0].Image)
			if tc.want == "sidecar-image:canary" {
				assert.Same(t, ss, got, "the latest is returned as is")
			}
			assert.LessOrEqual(t, calls, 1)
		})
	}
}

func TestForInjectionWithoutRevision(t *testing.T) {
	ss := ss1()
	got, err := ForInjection(ss, podWithLabels(nil), nil, nil)
	require.NoError(t, err)
	assert.Same(t, ss, got)

	ss.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{Policy: v1beta1.PartialSidecarSetInjectRevisionPolicy}
	got, err = ForInjection(ss, podWithLabels(nil), nil, nil)
	require.NoError(t, err)
	assert.Same(t, ss, got)

	_, err = ForInjection(nil, podWithLabels(nil), nil, nil)
	assert.Error(t, err)
}

func TestForInjectionNilRandAndPod(t *testing.T) {
	ss, src := canarySet(t)
	hundred := intstr.FromString("100%")
	ss.Spec.UpdateStrategy.Partition = &hundred
	ss.Spec.UpdateStrategy.Selector = nil
	got, err := ForInjection(ss, nil, src, nil) // default random source; 100% is always historical
	require.NoError(t, err)
	assert.Equal(t, "sidecar-image:stable", got.Spec.Containers[0].Image)

	ss.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
	got, err = ForInjection(ss, nil, src, nil) // a nil pod has no labels: outside the selector
	require.NoError(t, err)
	assert.Equal(t, "sidecar-image:stable", got.Spec.Containers[0].Image)
}
