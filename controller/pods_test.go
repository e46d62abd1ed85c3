package controller

import (
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// conditionPatch applied as the API server would: it sets the condition when status.conditions
// is as seen, and fails when another writer changed the list in between.
func TestConditionPatch(t *testing.T) {
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
	old := corev1.PodCondition{Type: "SidecarSetUpgradable", Status: corev1.ConditionFalse, Message: `{"a":false}`}
	cond := corev1.PodCondition{Type: "SidecarSetUpgradable", Status: corev1.ConditionTrue, Message: `{"a":true}`}
	podWith := func(conds ...corev1.PodCondition) []byte {
		b, err := json.Marshal(corev1.Pod{Status: corev1.PodStatus{Conditions: conds}})
		require.NoError(t, err)
		return b
	}
	for _, tc := range []struct {
		name       string
		seen, now  []corev1.PodCondition
		want       []corev1.PodCondition
		concurrent bool
	}{
		{"appended", []corev1.PodCondition{ready}, []corev1.PodCondition{ready}, []corev1.PodCondition{ready, cond}, false},
		{"replaced", []corev1.PodCondition{ready, old}, []corev1.PodCondition{ready, old}, []corev1.PodCondition{ready, cond}, false},
		{"first condition", nil, nil, []corev1.PodCondition{cond}, false},
		{"another SidecarSet wrote meanwhile", []corev1.PodCondition{ready, old}, []corev1.PodCondition{ready, {Type: "SidecarSetUpgradable", Message: `{"a":false,"b":false}`}}, nil, true},
		{"a list appeared meanwhile", nil, []corev1.PodCondition{ready}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := conditionPatch(tc.seen, cond)
			require.NoError(t, err)
			p, err := jsonpatch.DecodePatch(raw)
			require.NoError(t, err)
			out, err := p.Apply(podWith(tc.now...))
			if tc.concurrent {
				assert.Error(t, err, "the test operation refuses a list that changed")
				return
			}
			require.NoError(t, err)
			var pod corev1.Pod
			require.NoError(t, json.Unmarshal(out, &pod))
			assert.Equal(t, tc.want, pod.Status.Conditions)
		})
	}
}
