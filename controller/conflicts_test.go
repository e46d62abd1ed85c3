package controller

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

type finder struct {
	others  []string
	current bool
}

func (f *finder) Conflicts(context.Context, *v1beta1.SidecarSet) ([]string, bool, error) {
	return f.others, f.current, nil
}

// The Conflict condition follows what the policies say, with one Event per change, and both
// sides of a collision are sent to the work queue whenever it appears or goes.
func TestConflictCondition(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	c := newConflicts(m)
	rec := events.NewFakeRecorder(10)
	f := &finder{}
	r := &Reconciler{Conflicts: f, Recorder: rec, Metrics: m, conflicts: c}
	ss := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "b", Generation: 1}}
	ctx := context.Background()

	step := func(others []string, current bool) (*metav1.Condition, bool) {
		t.Helper()
		f.others, f.current = others, current
		conds, pending, err := r.conflictCondition(ctx, ss)
		require.NoError(t, err)
		ss.Status.Conditions = conds
		return meta.FindStatusCondition(conds, v1beta1.ConditionConflict), pending
	}
	queued := func() []string {
		var names []string
		for {
			select {
			case ev := <-c.enqueue:
				names = append(names, ev.Object.Name)
			default:
				return names
			}
		}
	}

	cond, pending := step(nil, false)
	assert.Nil(t, cond)
	assert.True(t, pending, "not in the policy state yet: look again")
	cond, pending = step(nil, true)
	assert.Nil(t, cond, "never in conflict: no condition, as OpenKruise shows")
	assert.False(t, pending)

	cond, _ = step([]string{"a"}, true)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionTrue, cond.Status)
	assert.Contains(t, cond.Message, "collides with SidecarSet a")
	assert.Contains(t, <-rec.Events, "Warning "+ReasonCollides)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.conflictsDetected))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.inConflict))
	assert.Eventually(t, func() bool { return len(c.enqueue) == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, []string{"a"}, queued(), "the other side is reconciled to report it too")

	cond, _ = step([]string{"a"}, true)
	assert.Equal(t, metav1.ConditionTrue, cond.Status)
	assert.Empty(t, rec.Events, "no second Event for the same collision")

	cond, _ = step(nil, true)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Contains(t, <-rec.Events, "Normal "+ReasonNoConflict)
	assert.Equal(t, 0.0, testutil.ToFloat64(m.inConflict))
	assert.Eventually(t, func() bool { return len(c.enqueue) == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, []string{"a"}, queued(), "the former partner is reconciled to clear its condition")
}
