package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func stepNames(steps []Step) [][]string {
	var out [][]string
	for _, s := range steps {
		out = append(out, append(names(s.Upgrade), names(s.Reset)...))
	}
	return out
}

func TestForecast(t *testing.T) {
	two := intstr.FromInt32(2)
	one := intstr.FromInt32(1)
	for _, tc := range []struct {
		name string
		edit func(ss *SidecarSetEdit)
		pods func() []*corev1.Pod
		want [][]string
	}{
		{"maxUnavailable 2: newest first, two at a time", func(e *SidecarSetEdit) { e.maxUnavailable = &two },
			func() []*corev1.Pod { return c13Pods(6, 0, 0) },
			[][]string{{"pod-5", "pod-4"}, {"pod-3", "pod-2"}, {"pod-1", "pod-0"}}},
		{"partition 1 holds the last one back", func(e *SidecarSetEdit) { e.maxUnavailable = &two; e.partition = &one },
			func() []*corev1.Pod { return c13Pods(4, 0, 0) },
			[][]string{{"pod-3", "pod-2"}, {"pod-1"}}},
		{"an in-flight pod waits for the kubelet, then the budget is free", nil,
			func() []*corev1.Pod { return c13Pods(3, 1, 0) },
			[][]string{{}, {"pod-2"}, {"pod-1"}}},
		{"paused: nothing", func(e *SidecarSetEdit) { e.paused = true },
			func() []*corev1.Pod { return c13Pods(3, 0, 0) }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss := ssC13()
			if tc.edit != nil {
				e := &SidecarSetEdit{}
				tc.edit(e)
				ss.Spec.UpdateStrategy.MaxUnavailable, ss.Spec.UpdateStrategy.Partition, ss.Spec.UpdateStrategy.Paused = e.maxUnavailable, e.partition, e.paused
			}
			pods := tc.pods()
			steps, err := Forecast(ss, pods, t0, 10)
			require.NoError(t, err)
			assert.Equal(t, tc.want, stepNames(steps))
			assert.Equal(t, "aaa", PodHash(pods[len(pods)-1], ss.Name), "input pods untouched")
		})
	}

	ss := hotSidecarSet()
	steps, err := Forecast(ss, []*corev1.Pod{hotPod()}, t0, 10)
	require.NoError(t, err)
	require.Len(t, steps, 2, "hot upgrade: upgrade the idle twin, then reset the old one")
	assert.Len(t, steps[0].Upgrade, 1)
	assert.Len(t, steps[1].Reset, 1)
	assert.Equal(t, "hotupgrade:empty", container(steps[1].Reset[0], "test-sidecar-1").Image)
}

// SidecarSetEdit names the strategy fields a forecast case changes.
type SidecarSetEdit struct {
	maxUnavailable, partition *intstr.IntOrString
	paused                    bool
}
