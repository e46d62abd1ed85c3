package rollout

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// BenchmarkManagerMemory measures the manager's resident memory, as its own process, with 1,000
// SidecarSets and 10,000 pods (each SidecarSet selects ten; unscheduled, so no kubelet work): the
// largest RSS seen over 10 s once every SidecarSet's status has counted its pods. Run it alone:
//
//	go test ./test/rollout/ -run '^$' -bench ManagerMemory -benchtime 1x
func BenchmarkManagerMemory(b *testing.B) {
	const sidecarSets, pods = 1000, 10000
	ctx := context.Background()
	benchRuns++
	ns := fmt.Sprintf("memory-%d", benchRuns)
	c := cluster.Client
	require.NoError(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	set := func(i int) *v1beta1.SidecarSet {
		ss := scopedSidecarSet(fmt.Sprintf("%s-%d", ns, i))
		ss.Spec.NamespaceSelector = v1beta1.NamespaceNamed(ns)
		ss.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"svc": fmt.Sprint(i)}}
		ss.Spec.Containers[0].Name = fmt.Sprintf("agent-%d", i)
		return ss
	}
	b.Cleanup(func() {
		for i := range sidecarSets {
			_ = c.Delete(ctx, set(i))
		}
		_ = c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns))
	})
	parallel(b, sidecarSets, func(i int) error { return c.Create(ctx, set(i)) })
	waitB(b, "injection", func() error {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe", Labels: map[string]string{"svc": fmt.Sprint(sidecarSets - 1)}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}},
		}
		if err := c.Create(ctx, p, client.DryRunAll); err != nil {
			return err
		}
		if len(p.Spec.Containers) != 2 {
			return fmt.Errorf("not injected yet")
		}
		return nil
	})
	parallel(b, pods, func(i int) error {
		return c.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("pod-%d", i), Labels: map[string]string{"svc": fmt.Sprint(i % sidecarSets)}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}},
		})
	})

	proc, err := cluster.StartManagerProcess(ctx, buildCommand(b, "sidecarops-manager"))
	require.NoError(b, err)
	b.Cleanup(func() {
		_ = proc.Terminate()
		require.NoError(b, cluster.RestartManager(ctx))
	})
	waitB(b, "every SidecarSet counted its pods", func() error {
		var list v1beta1.SidecarSetList
		if err := c.List(ctx, &list); err != nil {
			return err
		}
		short := 0
		for _, ss := range list.Items {
			if ss.Spec.NamespaceSelector != nil && ss.Spec.NamespaceSelector.MatchLabels[v1beta1.NamespaceNameLabel] == ns && ss.Status.MatchedPods != pods/sidecarSets {
				short++
			}
		}
		if short > 0 {
			return fmt.Errorf("%d SidecarSets not counted yet", short)
		}
		return nil
	})
	var peak int64
	for range 20 {
		rss, err := proc.RSS()
		require.NoError(b, err)
		peak = max(peak, rss)
		time.Sleep(500 * time.Millisecond)
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
}
