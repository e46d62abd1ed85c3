package rollout

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/kwok"
)

// budgetWatch checks, at every state the watch shows, that at most limit pods have been moved to
// img and are not yet running it, and records the most seen at once.
func budgetWatch(f *fleet, img string, limit int) (*podWatch, *int) {
	peak := new(int)
	pw := f.watchPods(func(pods map[string]*corev1.Pod) error {
		n := 0
		for _, p := range pods {
			if unavailableUpgraded(p, sidecar, img) {
				n++
			}
		}
		*peak = max(*peak, n)
		if n > limit {
			return fmt.Errorf("%d upgraded pods unavailable, maxUnavailable %d", n, limit)
		}
		return nil
	})
	return pw, peak
}

func TestImageChangeRollsOutWithinMaxUnavailable(t *testing.T) {
	const n, budget = 6, 2
	f := newFleet(t, "rolling", n, func(ss *v1beta1.SidecarSet) {
		ss.Spec.UpdateStrategy.MaxUnavailable = ptrIntStr(intstr.FromInt32(budget))
	}, nil)
	pw, peak := budgetWatch(f, image("2"), budget)
	fromCounts := roundsPlannedFrom(t, "kept_counts")
	f.update(func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].Image = image("2") })

	// Status follows compat §3.4 at every state the SidecarSet is stored in.
	var statusSeen []counts
	eventually(t, "rollout done", func() error {
		ss := f.sidecarSet()
		if ss.Status.ObservedGeneration != ss.Generation {
			return fmt.Errorf("generation %d not observed yet", ss.Generation)
		}
		st := statusCounts(ss.Status)
		if len(statusSeen) > 0 {
			prev := statusSeen[len(statusSeen)-1]
			require.GreaterOrEqual(t, st.updated, prev.updated, "updatedPods never goes back during a rollout: %v then %+v", statusSeen, st)
			require.GreaterOrEqual(t, st.updatedReady, prev.updatedReady, "updatedReadyPods never goes back: %v then %+v", statusSeen, st)
		}
		statusSeen = append(statusSeen, st)
		require.Equal(t, int32(n), st.matched, "matched pods never change during a rollout")
		require.LessOrEqual(t, st.updatedReady, st.updated)
		require.LessOrEqual(t, st.updatedReady, st.ready)
		if st != (counts{n, n, n, n}) {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	pw.check(t)
	assert.Equal(t, budget, *peak, "the controller uses the whole budget in each batch (the watch saw %d at once)", *peak)
	// The first round after the change counts every pod; later ones read only the pods left.
	assert.Greater(t, roundsPlannedFrom(t, "kept_counts"), fromCounts, "no round planned from the pods left to upgrade")
	for name, img := range f.images(sidecar) {
		assert.Equal(t, image("2"), img, name)
	}
	for _, p := range f.list() {
		s := containerStatus(p, sidecar)
		assert.Equal(t, kwok.ImageID(image("2")), s.ImageID, "%s runs the new image", p.Name)
		assert.Equal(t, int32(1), s.RestartCount, "%s was restarted in place exactly once", p.Name)
		assert.Equal(t, int32(0), containerStatus(p, "app").RestartCount, "%s: the app container is untouched", p.Name)
		cond := upgradableCondition(p)
		require.NotNil(t, cond, p.Name)
		assert.Equal(t, corev1.ConditionTrue, cond.Status)
		assert.JSONEq(t, `{"rolling":true}`, cond.Message)
	}
	ss := f.sidecarSet()
	assert.Equal(t, ss.Status.LatestRevision, podRevision(t, f.list()[0], "rolling"), "pods record the revision they were upgraded to")
	t.Logf("status polled during the rollout: %v", statusSeen)
}

func TestPartitionHoldsBackAndUpdateSelectorLimits(t *testing.T) {
	const n = 4
	f := newFleet(t, "partition", n, func(ss *v1beta1.SidecarSet) {
		ss.Spec.UpdateStrategy.MaxUnavailable = ptrIntStr(intstr.FromString("100%"))
		ss.Spec.UpdateStrategy.Partition = ptrIntStr(intstr.FromInt32(1))
	}, nil)
	f.update(func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].Image = image("2") })
	f.waitStatus(counts{n, n - 1, n, n - 1})
	old := 0
	for _, img := range f.images(sidecar) {
		if img == image("1") {
			old++
		}
	}
	assert.Equal(t, 1, old, "partition 1 keeps exactly one pod on the old image")
	// kubectl shows where the rollout stands.
	out, err := exec.Command("kubectl", "--kubeconfig", cluster.Kubeconfig, "get", "sidecarset", "partition", "-o", "wide").CombinedOutput()
	require.NoError(t, err, "%s", out)
	cols := table(t, string(out))
	assert.Equal(t, map[string]string{
		"NAME": "partition", "MATCHED": "4", "UPDATED": "3", "READY": "4", "UPDATED-READY": "3",
		"PAUSED": "", "PARTITION": "1", "MAX-UNAVAILABLE": "100%", "REVISION": f.sidecarSet().Status.LatestRevision,
	}, without(cols, "AGE"))
	evs := events(t, f.sidecarSet())
	e, ok := hasEvent(evs, "RolloutWaiting")
	require.True(t, ok, "an Event says why the rollout stopped: %+v", evs)
	assert.Contains(t, e.Note, "held back by partition 1")

	f.update(func(ss *v1beta1.SidecarSet) { ss.Spec.UpdateStrategy.Partition = nil })
	f.waitStatus(counts{n, n, n, n})

	sel := newFleet(t, "selector", n, func(ss *v1beta1.SidecarSet) {
		ss.Spec.UpdateStrategy.MaxUnavailable = ptrIntStr(intstr.FromString("100%"))
		ss.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
	}, func(i int) map[string]string {
		if i%2 == 1 {
			return map[string]string{"canary": "true"}
		}
		return nil
	})
	sel.update(func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].Image = image("2") })
	sel.waitStatus(counts{n, 2, n, 2})
	assert.Equal(t, map[string]string{"pod-0": image("1"), "pod-1": image("2"), "pod-2": image("1"), "pod-3": image("2")}, sel.images(sidecar))
}

func TestPausedAndNotUpdateStopTheRollout(t *testing.T) {
	const n = 3
	f := newFleet(t, "paused", n, func(ss *v1beta1.SidecarSet) {
		ss.Spec.UpdateStrategy.MaxUnavailable = ptrIntStr(intstr.FromString("100%"))
		ss.Spec.UpdateStrategy.Paused = true
	}, nil)
	pw, _ := budgetWatch(f, image("2"), 0)
	f.update(func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].Image = image("2") })
	f.waitStatus(counts{n, 0, n, 0})
	// The controller has seen the change (observedGeneration): give it a few more rounds' worth
	// of pod events and time before concluding nothing moves.
	time.Sleep(3 * imageChangeDelay)
	pw.check(t)
	for name, img := range f.images(sidecar) {
		assert.Equal(t, image("1"), img, "%s: paused", name)
	}

	f.update(func(ss *v1beta1.SidecarSet) {
		ss.Spec.UpdateStrategy.Paused = false
		ss.Spec.UpdateStrategy.Type = v1beta1.NotUpdateSidecarSetStrategyType
	})
	f.waitStatus(counts{n, 0, n, 0})
	time.Sleep(3 * imageChangeDelay)
	for name, img := range f.images(sidecar) {
		assert.Equal(t, image("1"), img, "%s: NotUpdate", name)
	}

	f.update(func(ss *v1beta1.SidecarSet) {
		ss.Spec.UpdateStrategy.Type = v1beta1.RollingUpdateSidecarSetStrategyType
	})
	f.waitStatus(counts{n, n, n, n})

	// A deleted pod leaves the status at once (OpenKruise waits for another event, quirk Q16).
	require.NoError(t, cluster.Client.Delete(testCtx(t), f.list()[0], client.GracePeriodSeconds(0)))
	f.waitStatus(counts{n - 1, n - 1, n - 1, n - 1})
}

// A non-image change is never rolled out (Kubernetes cannot change more than images in place):
// the pods are marked not upgradable and an Event says so. A pod created afterwards gets the new
// spec from the webhook, and a later image change upgrades only that pod (compat §4.8 E1).
func TestNonImageChangeIsNotUpgradable(t *testing.T) {
	const n = 2
	f := newFleet(t, "immutable", n, nil, nil)
	f.update(func(ss *v1beta1.SidecarSet) {
		ss.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "new"}}
	})
	f.waitStatus(counts{n, 0, n, 0})
	eventually(t, "pods marked not upgradable", func() error {
		for _, p := range f.list() {
			c := upgradableCondition(p)
			if c == nil || c.Status != corev1.ConditionFalse {
				return fmt.Errorf("%s: condition %+v", p.Name, c)
			}
			if c.Reason != "UpdateImmutableField" || c.Message != `{"immutable":false}` {
				return fmt.Errorf("%s: reason %q message %q", p.Name, c.Reason, c.Message)
			}
		}
		return nil
	})
	eventually(t, "NotUpgradablePods event", func() error {
		if e, ok := hasEvent(events(t, f.sidecarSet()), "NotUpgradablePods"); !ok {
			return fmt.Errorf("no event yet")
		} else if e.Type != corev1.EventTypeNormal {
			return fmt.Errorf("event type %s", e.Type)
		} else if !strings.Contains(e.Note, "spec.containers[0].env (only images can change in place)") {
			return fmt.Errorf("the event does not name the field: %s", e.Note)
		}
		return nil
	})

	// The webhook's policy snapshot follows the change on its own schedule (debounced compile), and
	// a pod created before it has is injected with the old spec, as in OpenKruise with a lagging
	// informer. Under the race detector the compile is slow enough for that to happen.
	f.waitInjectsCurrentSpec()
	late := f.pod(n, nil)
	require.NoError(t, cluster.Client.Create(testCtx(t), late))
	// Injected with the current spec, the new pod counts as updated.
	f.waitStatus(counts{n + 1, 1, n + 1, 1})
	f.update(func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].Image = image("2") })
	f.waitStatus(counts{n + 1, 1, n + 1, 1})
	eventually(t, "the new pod runs the new image", func() error {
		for _, p := range f.list() {
			if p.Name == late.Name && containerStatus(p, sidecar).Image != image("2") {
				return fmt.Errorf("%s runs %s", p.Name, containerStatus(p, sidecar).Image)
			}
		}
		return nil
	})
	assert.Equal(t, map[string]string{"pod-0": image("1"), "pod-1": image("1"), late.Name: image("2")}, f.images(sidecar))
}

// table reads kubectl's one-row table output into column → cell, by the header's offsets.
func table(t *testing.T, out string) map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, 2, "%s", out)
	header, row := lines[0], lines[1]+strings.Repeat(" ", len(lines[0]))
	cols := map[string]string{}
	fields := strings.Fields(header)
	for i, name := range fields {
		start := strings.Index(header, name)
		end := len(header)
		if i+1 < len(fields) {
			end = strings.Index(header, fields[i+1])
		}
		if i+1 == len(fields) {
			end = len(row)
		}
		cols[name] = strings.TrimSpace(row[start:end])
	}
	return cols
}

func without(m map[string]string, key string) map[string]string {
	delete(m, key)
	return m
}

func upgradableCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == "SidecarSetUpgradable" {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func podRevision(t *testing.T, p *corev1.Pod, ss string) string {
	t.Helper()
	var m map[string]struct {
		ControllerRevision string `json:"controllerRevision"`
	}
	require.NoError(t, json.Unmarshal([]byte(p.Annotations[v1beta1.SidecarSetHashAnnotation]), &m))
	return m[ss].ControllerRevision
}

func ptrIntStr(v intstr.IntOrString) *intstr.IntOrString { return &v }
