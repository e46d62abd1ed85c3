package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/injector"
	fleetpkg "github.com/sidecarops/sidecarops/internal/testing/fleet"
	"github.com/sidecarops/sidecarops/mutation"
)

// fleet is internal/testing/fleet's, failing the benchmark on error.
func fleet(tb testing.TB, n, matching int) []*v1beta1.SidecarSet {
	tb.Helper()
	sets, err := fleetpkg.SidecarSets(n, matching)
	if err != nil {
		tb.Fatal(err)
	}
	return sets
}

// pod is internal/testing/fleet's pod as JSON, the form a webhook receives.
func pod(tb testing.TB) []byte {
	tb.Helper()
	raw, err := json.Marshal(fleetpkg.Pod())
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

func snapshot(tb testing.TB, sets []*v1beta1.SidecarSet) *engine.Snapshot {
	tb.Helper()
	s, err := injector.Snapshot(context.Background(), injector.Policies{State: bundles.State{SidecarSets: sets}})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// admit is one pod admission minus the HTTP layer: decode the pod, then the webhook's own path
// (internal/injector) with the snapshot's revisions.
func admit(ctx context.Context, s *engine.Snapshot, inj *mutation.Injector, raw []byte) (injector.PodResult, error) {
	var p corev1.Pod
	if err := json.Unmarshal(raw, &p); err != nil {
		return injector.PodResult{}, err
	}
	return injector.Pod(ctx, s, inj, injector.PodRequest{Pod: &p, Raw: raw, Namespace: "shop"})
}

// BenchmarkAdmission: decide+mutate per pod. "matching=1" keeps one matching SidecarSet whatever the
// fleet size (the realistic case: a pod gets a handful of sidecars); "matching=1pct" lets 1% of the
// fleet match (100 sidecars injected into one pod at 10,000), which measures mutation volume more
// than the decision.
func BenchmarkAdmission(b *testing.B) {
	ctx := context.Background()
	raw := pod(b)
	inj := &mutation.Injector{Now: func() time.Time { return time.Unix(1700000000, 0) }, Rand: func() float64 { return 0.5 }}
	for _, n := range []int{10, 100, 1000, 10000} {
		for _, m := range []struct {
			name  string
			count int
		}{{"1", 1}, {"1pct", max(1, n/100)}} {
			s := snapshot(b, fleet(b, n, m.count))
			res, err := admit(ctx, s, inj, raw)
			if err != nil {
				b.Fatal(err)
			}
			if got := len(res.Injected); got != m.count {
				b.Fatalf("sidecarsets=%d: injected %d SidecarSets, want %d", n, got, m.count)
			}
			b.Run(fmt.Sprintf("sidecarsets=%d/matching=%s", n, m.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := admit(ctx, s, inj, raw); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkDecide isolates the policy decision (one matching SidecarSet). "changed=1" decides with
// the snapshot the policy loader's Compiler prepares after one SidecarSet's selector changed in a
// fleet of 1,000 or more: its rules, compiled apart from the others', are evaluated first.
func BenchmarkDecide(b *testing.B) {
	ctx := context.Background()
	raw := pod(b)
	for _, n := range []int{10, 100, 1000, 10000} {
		sets := fleet(b, n, 1)
		snaps := map[string]*engine.Snapshot{"": snapshot(b, sets)}
		if n >= 1000 {
			var c engine.Compiler
			st := bundles.State{SidecarSets: append([]*v1beta1.SidecarSet(nil), sets...)}
			changed := sets[n/2].DeepCopy()
			changed.Spec.Selector.MatchLabels["changed"] = "yes"
			for _, ss := range []*v1beta1.SidecarSet{sets[n/2], changed} {
				st.SidecarSets[n/2] = ss
				s, err := c.Snapshot(ctx, st, nil)
				if err != nil {
					b.Fatal(err)
				}
				snaps["/changed=1"] = s
			}
		}
		for _, variant := range []string{"", "/changed=1"} {
			s := snaps[variant]
			if s == nil {
				continue
			}
			b.Run(fmt.Sprintf("sidecarsets=%d%s", n, variant), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := s.Decide(ctx, "shop", raw); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkCompile measures building and preparing a snapshot from scratch (engine.Compiler): the
// policy loader's first compile and its whole compiles, and every compile of sidecarctl and the tests.
func BenchmarkCompile(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		sets := fleet(b, n, 1)
		b.Run(fmt.Sprintf("sidecarsets=%d", n), func(b *testing.B) {
			for b.Loop() {
				snapshot(b, sets)
			}
		})
	}
}

// BenchmarkRecompile measures what the policy loader's engine.Compiler spends on one SidecarSet
// change in a fleet of n, after the fleet's first (whole) compile:
//
//   - selector: the SidecarSet's selector changes, so its index rules do: they are compiled alone
//     (the delta), the data is rebuilt and the queries prepared again;
//   - image: a field no policy reads: the same prepared queries hand out the new object;
//   - paused: the rules go and the document changes (data and delta);
//
// Each iteration alternates between two versions of the SidecarSet, so every one is a change.
func BenchmarkRecompile(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 10000} {
		sets := fleet(b, n, 1)
		for _, tc := range []struct {
			name   string
			change func(*v1beta1.SidecarSet)
		}{
			{"selector", func(ss *v1beta1.SidecarSet) { ss.Spec.Selector.MatchLabels["changed"] = "yes" }},
			{"image", func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].Image += "-changed" }},
			{"paused", func(ss *v1beta1.SidecarSet) { ss.Spec.InjectionStrategy.Paused = true }},
		} {
			b.Run(fmt.Sprintf("sidecarsets=%d/%s", n, tc.name), func(b *testing.B) {
				var c engine.Compiler
				st := bundles.State{SidecarSets: append([]*v1beta1.SidecarSet(nil), sets...)}
				if _, err := c.Snapshot(ctx, st, nil); err != nil {
					b.Fatal(err)
				}
				victim := n / 2
				versions := []*v1beta1.SidecarSet{sets[victim], sets[victim].DeepCopy()}
				tc.change(versions[1])
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					i++
					st.SidecarSets[victim] = versions[i%2]
					if _, err := c.Snapshot(ctx, st, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkConflicts validates one new SidecarSet against the fleet: the conflict policy looks up
// only the SidecarSets sharing one of its names (bundles' owners index). "distinct" shares nothing;
// "shared-volume" uses the volume name every SidecarSet of the fleet declares (identically), the
// worst case, where each owner must be compared.
func BenchmarkConflicts(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{100, 1000, 10000} {
		s := snapshot(b, fleet(b, n, 1))
		for _, tc := range []struct {
			name   string
			volume string
		}{{"distinct", "own-config"}, {"shared-volume", "agent-config"}} {
			candidate := fleet(b, 1, 1)[0]
			candidate.Name = "candidate"
			candidate.Spec.Containers[0].Name = "candidate-agent"
			candidate.Spec.Containers[0].VolumeMounts[0].Name = tc.volume
			candidate.Spec.Volumes[0].Name = tc.volume
			b.Run(fmt.Sprintf("sidecarsets=%d/%s", n, tc.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					v, err := s.Conflicts(ctx, candidate)
					if err != nil || len(v) != 0 {
						b.Fatal(v, err)
					}
				}
			})
		}
	}
}
