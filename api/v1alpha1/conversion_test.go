package v1alpha1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/randomobjects"
)

// v1beta1 → v1alpha1 → v1beta1 is the identity, except for one input OpenKruise loses the same
// way: a v1beta1 object carrying the v1alpha1 custom-version label itself (its value and
// spec.customVersion share one label in v1alpha1).
func TestBetaAlphaBetaIsTheIdentity(t *testing.T) {
	f := randomobjects.Filler(t, 1)
	for range 3000 {
		var beta v1beta1.SidecarSet
		f.Fill(&beta)
		beta.TypeMeta = metav1.TypeMeta{}
		delete(beta.Labels, v1alpha1.SidecarSetCustomVersionLabel)
		var alpha v1alpha1.SidecarSet
		require.NoError(t, alpha.ConvertFrom(&beta))
		var back v1beta1.SidecarSet
		require.NoError(t, alpha.ConvertTo(&back))
		require.True(t, apiequality.Semantic.DeepEqual(&beta, &back), "round trip changed the object:\n%#v\n%#v", beta.Spec, back.Spec)
	}
}

// v1alpha1 → v1beta1 → v1alpha1 loses what OpenKruise's conversion loses, and only that:
// spec.namespace (folded into namespaceSelector, which it replaces) and an empty custom-version
// label (spec.customVersion "" writes none back).
func TestAlphaBetaAlphaLosesOnlyTheNamespace(t *testing.T) {
	f := randomobjects.Filler(t, 2)
	for range 3000 {
		var alpha v1alpha1.SidecarSet
		f.Fill(&alpha)
		alpha.TypeMeta = metav1.TypeMeta{}
		var beta v1beta1.SidecarSet
		require.NoError(t, alpha.ConvertTo(&beta))
		var back v1alpha1.SidecarSet
		require.NoError(t, back.ConvertFrom(&beta))

		want := alpha.DeepCopy()
		if want.Spec.Namespace != "" {
			want.Spec.NamespaceSelector = v1beta1.NamespaceNamed(want.Spec.Namespace)
			want.Spec.Namespace = ""
		}
		if v, ok := want.Labels[v1alpha1.SidecarSetCustomVersionLabel]; ok && v == "" {
			delete(want.Labels, v1alpha1.SidecarSetCustomVersionLabel)
		}
		require.True(t, apiequality.Semantic.DeepEqual(want, &back), "round trip lost more than OpenKruise's:\n%#v\n%#v", want.Spec, back.Spec)
	}
}

func TestConvertTo(t *testing.T) {
	alpha := &v1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{v1alpha1.SidecarSetCustomVersionLabel: "v2", "team": "a"}},
		Spec: v1alpha1.SidecarSetSpec{
			Namespace:         "shop",
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
		},
	}
	var beta v1beta1.SidecarSet
	require.NoError(t, alpha.ConvertTo(&beta))
	assert.Equal(t, &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "shop"}}, beta.Spec.NamespaceSelector,
		"spec.namespace replaces the namespaceSelector")
	assert.Equal(t, "v2", beta.Spec.CustomVersion)
	assert.Equal(t, map[string]string{"team": "a"}, beta.Labels, "the label moved to spec.customVersion")
	assert.Equal(t, map[string]string{v1alpha1.SidecarSetCustomVersionLabel: "v2", "team": "a"}, alpha.Labels, "the source is not modified")
}
