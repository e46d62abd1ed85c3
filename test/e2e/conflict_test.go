package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/controller"
)

// Two SidecarSets that collide, created at the same moment, are both admitted: each is validated
// against a snapshot without the other. Afterwards the collision is reported on both (condition,
// Warning Event, metric); a pod both select is created with the older one's sidecar only, never
// refused by the API server; and updates, including one that resolves the collision, are admitted.
func TestConflictAdmittedConcurrentlyIsReportedAndInjectionStaysValid(t *testing.T) {
	namespace(t, "e2e-race", nil)
	var created []*v1beta1.SidecarSet
	t.Cleanup(func() {
		for _, ss := range created {
			_ = cluster.Client.Delete(ctx(t), ss)
		}
	})
	selector := map[string]string{"race": "on"}
	// Different images tell whose container a pod got.
	colliding := func(name string) *v1beta1.SidecarSet {
		return sidecarSet(name, selector, "race-proxy", func(ss *v1beta1.SidecarSet) {
			ss.Spec.Containers[0].Image = "example.com/" + name + ":1"
		})
	}
	detectedBefore := metricValue(t, "sidecarops_controller_conflicts_detected_total")
	var older, newer *v1beta1.SidecarSet
	for try := 0; older == nil; try++ {
		require.Less(t, try, 20, "two colliding SidecarSets were never admitted together")
		a, b := colliding(fmt.Sprintf("e2e-race-a%d", try)), colliding(fmt.Sprintf("e2e-race-b%d", try))
		var wg sync.WaitGroup
		var errA, errB error
		wg.Go(func() { errA = cluster.Client.Create(ctx(t), a) })
		wg.Go(func() { errB = cluster.Client.Create(ctx(t), b) })
		wg.Wait()
		created = append(created, a, b)
		if errA == nil && errB == nil {
			// Created in the same second, the name decides which is older.
			older, newer = a, b
			if a.CreationTimestamp.After(b.CreationTimestamp.Time) {
				older, newer = b, a
			}
			t.Logf("both admitted at try %d", try)
			break
		}
	}

	conflict := func(name string) *metav1.Condition {
		var ss v1beta1.SidecarSet
		require.NoError(t, cluster.Client.Get(ctx(t), client.ObjectKey{Name: name}, &ss))
		return meta.FindStatusCondition(ss.Status.Conditions, v1beta1.ConditionConflict)
	}
	for _, pair := range [][2]*v1beta1.SidecarSet{{older, newer}, {newer, older}} {
		eventually(t, pair[0].Name+" reports the collision", func() error {
			c := conflict(pair[0].Name)
			if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, pair[1].Name) {
				return fmt.Errorf("condition %+v", c)
			}
			if !hasEvent(t, pair[0].Name, corev1.EventTypeWarning, controller.ReasonCollides) {
				return fmt.Errorf("no Warning Event")
			}
			return nil
		})
	}
	assert.GreaterOrEqual(t, metricValue(t, "sidecarops_controller_conflicts_detected_total")-detectedBefore, 2.0)
	assert.GreaterOrEqual(t, metricValue(t, "sidecarops_controller_sidecarsets_in_conflict"), 2.0)

	// Every pod both select is admitted with one race-proxy, the older one's.
	var p *corev1.Pod
	eventually(t, "a pod both select gets the older one's sidecar", func() error {
		p = pod("e2e-race", "both", selector)
		return cluster.Client.Create(ctx(t), p)
	})
	require.Equal(t, []string{"race-proxy", "app"}, containerNames(p))
	assert.Equal(t, older.Spec.Containers[0].Image, p.Spec.Containers[0].Image)

	// Both stay updatable: an unrelated change to the older one, then the newer one moving to other
	// pods, which resolves the collision.
	update := func(name string, change func(*v1beta1.SidecarSet)) {
		t.Helper()
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var ss v1beta1.SidecarSet
			if err := cluster.Client.Get(ctx(t), client.ObjectKey{Name: name}, &ss); err != nil {
				return err
			}
			change(&ss)
			return cluster.Client.Update(ctx(t), &ss)
		}), "updating %s", name)
	}
	update(older.Name, func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].Image = "example.com/older:2" })
	// A new collision is still refused.
	err := cluster.Client.Create(ctx(t), colliding("e2e-race-third"))
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err), "%v", err)
	update(newer.Name, func(ss *v1beta1.SidecarSet) { ss.Spec.Selector.MatchLabels = map[string]string{"race": "off"} })
	for _, name := range []string{older.Name, newer.Name} {
		eventually(t, name+" no longer reports a collision", func() error {
			if c := conflict(name); c == nil || c.Status != metav1.ConditionFalse {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		})
	}
}

func hasEvent(t *testing.T, regarding, kind, reason string) bool {
	t.Helper()
	for _, e := range eventsOf(t, regarding, reason) {
		if e.Type == kind {
			return true
		}
	}
	return false
}

// metricValue is the value of an unlabelled counter or gauge of this process's registry.
func metricValue(t *testing.T, name string) float64 {
	t.Helper()
	return labelledMetricValue(t, name, "", "")
}

// labelledMetricValue is the value of the counter or gauge name of this process's registry whose
// label is value (the first one when label is empty).
func labelledMetricValue(t *testing.T, name, label, value string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label != "" && !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == label && l.GetValue() == value }) {
				continue
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s{%s=%q}", name, label, value)
	return 0
}
