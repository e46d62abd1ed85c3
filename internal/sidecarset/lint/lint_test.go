package lint

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

func withStrategy(s v1beta1.SidecarSetUpdateStrategy) *v1beta1.SidecarSet {
	return &v1beta1.SidecarSet{Spec: v1beta1.SidecarSetSpec{
		Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		UpdateStrategy: s,
	}}
}

func ptr[T any](v T) *T { return &v }

func TestSidecarSet(t *testing.T) {
	pct := intstr.FromString("150%")
	for _, tc := range []struct {
		name     string
		strategy v1beta1.SidecarSetUpdateStrategy
		want     []Finding
	}{
		{"nothing written: the defaults are no mistake", v1beta1.SidecarSetUpdateStrategy{}, nil},
		{"RollingUpdate within bounds", v1beta1.SidecarSetUpdateStrategy{Type: "RollingUpdate", MaxUnavailable: ptr(intstr.FromString("100%"))}, nil},
		{"RollingUpdate over 100%", v1beta1.SidecarSetUpdateStrategy{Type: "RollingUpdate", MaxUnavailable: &pct}, []Finding{
			{RuleMaxUnavailable, "spec.updateStrategy.maxUnavailable", `Invalid value: "150%": over 100%: every pod may be upgraded at once`},
		}},
		{"a typo: the type, and what RollingUpdate would refuse", v1beta1.SidecarSetUpdateStrategy{Type: "RollingUpdates", Partition: ptr(intstr.FromInt32(-1))}, []Finding{
			{RuleStrategyType, "spec.updateStrategy.type", `Unsupported value: "RollingUpdates": supported values: "NotUpdate", "RollingUpdate": OpenKruise admits it and upgrades pods as with RollingUpdate, without validating the strategy`},
			{RuleUncheckedStrategy, "spec.updateStrategy.partition", "Invalid value: -1: must be greater than or equal to 0 (as RollingUpdate would require)"},
		}},
		{"NotUpdate reads none of the rest", v1beta1.SidecarSetUpdateStrategy{Type: "NotUpdate", Paused: true, MaxUnavailable: &pct}, []Finding{
			{RuleIgnoredStrategyField, "spec.updateStrategy.paused", "ignored: updateStrategy.type NotUpdate never upgrades pods"},
			{RuleIgnoredStrategyField, "spec.updateStrategy.maxUnavailable", "ignored: updateStrategy.type NotUpdate never upgrades pods"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, SidecarSet(withStrategy(tc.strategy)))
		})
	}
}

func TestSelector(t *testing.T) {
	ss := withStrategy(v1beta1.SidecarSetUpdateStrategy{})
	pod := func(app string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}}}
	}
	assert.Nil(t, Selector(ss, nil), "no pods given: nothing to say")
	assert.Nil(t, Selector(ss, []*corev1.Pod{pod("db"), pod("web")}))
	assert.Equal(t, []Finding{{RuleSelectorMatchesNothing, "spec.selector", "app=web matches none of the 2 pod(s) of the input"}},
		Selector(ss, []*corev1.Pod{pod("db"), pod("wbe")}))
}
