package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// Status writes that change only the pod counters are spaced countersBatch apart; anything else is
// written at once.
func TestCountersWait(t *testing.T) {
	current := v1beta1.SidecarSetStatus{ObservedGeneration: 2, MatchedPods: 10, UpdatedPods: 10, ReadyPods: 8, LatestRevision: "r2"}
	counters := current
	counters.MatchedPods, counters.UpdatedPods, counters.ReadyPods, counters.UpdatedReadyPods = 12, 12, 9, 9
	generation := counters
	generation.ObservedGeneration = 3
	conditions := current
	conditions.Conditions = []metav1.Condition{{Type: v1beta1.ConditionConflict, Status: metav1.ConditionTrue}}
	cases := []struct {
		name    string
		written time.Duration // how long ago the last write was; 0: never
		status  v1beta1.SidecarSetStatus
		wait    bool
	}{
		{"first write", 0, counters, false},
		{"counters, just written", time.Millisecond, counters, true},
		{"counters, written a while ago", 2 * countersBatch, counters, false},
		{"counters and generation", time.Millisecond, generation, false},
		{"a condition", time.Millisecond, conditions, false},
		{"nothing changed", time.Millisecond, current, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{}
			ss := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Status: current}
			if tc.written > 0 {
				r.statusWritten.Store("s", time.Now().Add(-tc.written))
			}
			wait := r.countersWait(ss, tc.status)
			if tc.wait {
				assert.Greater(t, wait, time.Duration(0))
				assert.LessOrEqual(t, wait, countersBatch)
			} else {
				assert.Zero(t, wait)
			}
		})
	}
}
