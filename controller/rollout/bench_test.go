package rollout

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// BenchmarkRound1000 is the controller's planning of one round over 1,000 pods (NextRound and
// Status), which every pod event of a SidecarSet triggers: with the pods' annotation parses
// memoized (steady state: the pods did not change since the last round) and without (every pod
// new to the cache).
func BenchmarkRound1000(b *testing.B) {
	ss := ssC13()
	all := intstr.FromString("100%")
	ss.Spec.UpdateStrategy.MaxUnavailable = &all
	pods := c13Pods(1000, 300, 260)
	for _, tc := range []struct {
		name string
		cold bool
	}{{"memoized", false}, {"cold", true}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if tc.cold {
					upgradeSpecs.m, inPlaceUpdateStates.m = nil, nil
				}
				NextRound(ss, pods)
				Status(ss, pods, "", 0)
			}
		})
	}
}

// BenchmarkRoundLateInARollout is one round of a rollout of 10,000 pods with 100 left to upgrade,
// planned as the controller did before it kept the pods not updated (NextRound and Status over every
// pod) and as it plans now (NextRoundOf over the pods left, with the kept counts).
func BenchmarkRoundLateInARollout(b *testing.B) {
	ss := ssC13()
	all := intstr.FromString("100%")
	ss.Spec.UpdateStrategy.MaxUnavailable = &all
	pods := c13Pods(10000, 9900, 9800)
	left, c := kept(ss, pods)
	b.Run("every_pod", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			NextRound(ss, pods)
			Status(ss, pods, "", 0)
		}
	})
	b.Run("kept_counts", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			NextRoundOf(ss, left, c)
		}
	})
}
