package rollout

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// TestCanarySidecarSet (compat §1.21, compat §4.8 E8): pods matching a canary get the canary's sidecar and
// are the canary's, not the base's; the base's rollout leaves them alone.
func TestCanarySidecarSet(t *testing.T) {
	base := newFleet(t, "canary", 0, func(ss *v1beta1.SidecarSet) {
		ss.Spec.UpdateStrategy.MaxUnavailable = ptrIntStr(intstr.FromString("100%"))
	}, nil)
	ctx := testCtx(t)
	canary := &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "canary-canary", Annotations: map[string]string{
			v1beta1.SidecarSetCanaryAnnotation: "true",
			v1beta1.SidecarSetBaseAnnotation:   "canary",
		}},
		Spec: v1beta1.SidecarSetSpec{
			NamespaceSelector: v1beta1.NamespaceNamed("canary"),
			Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": "canary", "track": "canary"}},
			Containers:        []v1beta1.SidecarContainer{{Container: corev1.Container{Name: sidecar, Image: image("canary")}}},
			UpdateStrategy:    v1beta1.SidecarSetUpdateStrategy{Type: v1beta1.NotUpdateSidecarSetStrategyType},
		},
	}
	require.NoError(t, cluster.Client.Create(ctx, canary))
	eventually(t, "the webhook injects the canary", func() error {
		p := base.pod(-1, map[string]string{"track": "canary"})
		if err := cluster.Client.Create(ctx, p, client.DryRunAll); err != nil {
			return err
		}
		if got := specImage(p, sidecar); got != image("canary") {
			return fmt.Errorf("injected %q", got)
		}
		return nil
	})
	for i := range 4 {
		var lbls map[string]string
		if i%2 == 1 {
			lbls = map[string]string{"track": "canary"}
		}
		require.NoError(t, cluster.Client.Create(ctx, base.pod(i, lbls)))
	}
	base.waitStatus(counts{2, 2, 2, 2})
	canaryStatus := func() v1beta1.SidecarSetStatus {
		got := &v1beta1.SidecarSet{}
		require.NoError(t, cluster.Client.Get(ctx, client.ObjectKey{Name: canary.Name}, got))
		return got.Status
	}
	eventually(t, "canary status", func() error {
		if st := statusCounts(canaryStatus()); st != (counts{2, 2, 2, 2}) {
			return fmt.Errorf("canary status %+v", st)
		}
		return nil
	})
	want := map[string]string{"pod-0": image("1"), "pod-1": image("canary"), "pod-2": image("1"), "pod-3": image("canary")}
	assert.Equal(t, want, base.images(sidecar))
	for _, p := range base.list() {
		list := p.Annotations[v1beta1.SidecarSetListAnnotation]
		if want[p.Name] == image("canary") {
			assert.Equal(t, "canary-canary", list, "%s: the base is dropped where the canary matches", p.Name)
		} else {
			assert.Equal(t, "canary", list, p.Name)
		}
	}

	base.update(func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].Image = image("2") })
	base.waitStatus(counts{2, 2, 2, 2})
	eventually(t, "the base rolled out to its own pods only", func() error {
		want := map[string]string{"pod-0": image("2"), "pod-1": image("canary"), "pod-2": image("2"), "pod-3": image("canary")}
		for _, p := range base.list() {
			if got := containerStatus(p, sidecar).Image; got != want[p.Name] {
				return fmt.Errorf("%s runs %s, want %s", p.Name, got, want[p.Name])
			}
		}
		return nil
	})
}
