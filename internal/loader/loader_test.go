package loader

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/engine"
)

func TestReadyOnlyAfterFirstCompile(t *testing.T) {
	h := newHarness(t, Options{})
	require.NoError(t, h.st.RegisterSource("gates"))
	h.start(t)
	require.NoError(t, h.st.SetSidecarSet(sidecarSet("log", map[string]string{"app": "web"})))

	err := h.st.Ready()
	require.ErrorContains(t, err, "waiting for informers to sync")
	require.ErrorContains(t, err, "waiting for bundle sources gates")

	h.st.SetClusterSynced()
	// Synced but a registered source has offered nothing: serving now would drop the gates.
	eventually(t, func() bool { return !strings.Contains(fmt.Sprint(h.st.Ready()), "informers") }, "sync seen")
	require.ErrorContains(t, h.st.Ready(), "waiting for bundle sources gates")
	assert.Nil(t, h.eng.Current())
	assert.Zero(t, h.compiles(resultSuccess))

	require.NoError(t, h.st.SetBundle("gates", readBundle(t, gateFiles("g1", "no hostNetwork"))))
	eventually(t, func() bool { return h.st.Ready() == nil }, "ready")
	require.NoError(t, h.st.Check(nil))
	d := decide(t, h.eng)
	assert.Equal(t, []string{"no hostNetwork"}, d.Denied)
	ss, ok := h.eng.Current().SidecarSet("log")
	require.True(t, ok)
	assert.NotEmpty(t, ss.Annotations[v1beta1.SidecarSetHashAnnotation], "stored SidecarSets are defaulted and hashed")
	assert.Equal(t, 1.0, h.compiles(resultSuccess))
}

func TestSetBundleUnknownSource(t *testing.T) {
	h := newHarness(t, Options{})
	require.ErrorContains(t, h.st.SetBundle("nope", readBundle(t, gateFiles("g", "x"))), "unknown bundle source")
	require.ErrorContains(t, h.st.SetBundle(ConfigMapSource, readBundle(t, gateFiles("g", "x"))), "unknown bundle source")
	require.NoError(t, h.st.RegisterSource("a"))
	require.ErrorContains(t, h.st.RegisterSource("a"), "registered twice")
	require.ErrorContains(t, h.st.RegisterSource(ConfigMapSource), "registered twice")
	for _, bad := range []string{"", "../x", "a/b", ".hidden", strings.Repeat("a", 64)} {
		require.ErrorContains(t, h.st.RegisterSource(bad), "invalid source name", bad)
	}
	require.ErrorContains(t, h.st.SetBundle("a", nil), "no bundle")
}

// Many changes inside the quiet period compile once. The fake clock holds time still, so nothing
// can compile until the test steps it.
func TestManyChangesOneCompile(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	h := newHarness(t, Options{Clock: clk, Debounce: 100 * time.Millisecond, MaxDelay: time.Second})
	h.start(t)
	h.st.SetClusterSynced()
	eventually(t, func() bool { return h.st.Ready() == nil }, "first compile (not debounced)")
	require.Equal(t, 1.0, h.compiles(resultSuccess))
	first := h.eng.Current()

	for i := range 50 {
		require.NoError(t, h.st.SetSidecarSet(sidecarSet(fmt.Sprintf("ss-%02d", i), map[string]string{"app": fmt.Sprint(i)})))
		h.st.SetNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns-%d", i), Labels: map[string]string{"i": fmt.Sprint(i)}}})
	}
	eventually(t, clk.HasWaiters, "the loop waits out the quiet period")
	assert.Equal(t, 1.0, h.compiles(resultSuccess), "nothing compiles before the quiet period ends")
	assert.Same(t, first, h.eng.Current())

	// Step until the compile happens; a wake-up still in flight restarts the quiet period once more.
	eventually(t, func() bool {
		if clk.HasWaiters() {
			clk.Step(100 * time.Millisecond)
		}
		return h.compiles(resultSuccess) == 2
	}, "second compile")
	snap := h.eng.Current()
	for i := range 50 {
		_, ok := snap.SidecarSet(fmt.Sprintf("ss-%02d", i))
		require.True(t, ok, "ss-%02d", i)
	}
	// Stepping further compiles nothing more: every change was in that compile.
	for range 5 {
		clk.Step(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	assert.Equal(t, 2.0, h.compiles(resultSuccess))
	assert.Equal(t, uint64(2), histogramCount(t, h, resultSuccess))
}

func histogramCount(t *testing.T, h *harness, result string) uint64 {
	t.Helper()
	m := &dto.Metric{}
	require.NoError(t, h.st.metrics.compileDuration.WithLabelValues(result).(prometheus.Metric).Write(m))
	return m.GetHistogram().GetSampleCount()
}

// armClock reports every timer the loop arms, so a test knows the loop has taken a change in.
type armClock struct {
	*clocktesting.FakeClock
	armed chan time.Duration
}

func (c *armClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.armed <- d
	return t
}

// A stream of changes closer together than the quiet period still compiles after MaxDelay.
func TestMaxDelayBoundsDebounce(t *testing.T) {
	clk := &armClock{FakeClock: clocktesting.NewFakeClock(time.Unix(1000, 0)), armed: make(chan time.Duration, 100)}
	h := newHarness(t, Options{Clock: clk, Debounce: 100 * time.Millisecond, MaxDelay: 300 * time.Millisecond})
	h.start(t)
	h.st.SetClusterSynced()
	eventually(t, func() bool { return h.st.Ready() == nil }, "first compile")

	armed := func() time.Duration {
		select {
		case d := <-clk.armed:
			return d
		case <-time.After(20 * time.Second):
			t.Fatal("the loop armed no timer")
			return 0
		}
	}
	// Every 60ms a change restarts the 100ms quiet period, which alone would never end; the last
	// wait is cut to what is left of the 300ms.
	var waits []time.Duration
	for i := 0; ; i++ {
		require.NoError(t, h.st.SetSidecarSet(sidecarSet(fmt.Sprintf("s%d", i), map[string]string{"app": "x"})))
		waits = append(waits, armed())
		if waits[len(waits)-1] < 100*time.Millisecond {
			break
		}
		require.Less(t, i, 10, "MaxDelay never cut the quiet period: %v", waits)
		clk.Step(60 * time.Millisecond)
	}
	assert.Equal(t, []time.Duration{100, 100, 100, 100, 60}, scale(waits, time.Millisecond))
	assert.Equal(t, 1.0, h.compiles(resultSuccess))
	clk.Step(60 * time.Millisecond)
	eventually(t, func() bool { return h.compiles(resultSuccess) == 2 }, "compile at MaxDelay")
	_, ok := h.eng.Current().SidecarSet("s4")
	assert.True(t, ok)
}

func scale(ds []time.Duration, unit time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d / unit
	}
	return out
}

// Updates that change nothing the bundle reads do not mark the state dirty.
func TestIrrelevantUpdatesDoNotRecompile(t *testing.T) {
	h := newHarness(t, Options{})
	ss := sidecarSet("a", map[string]string{"app": "web"})
	require.NoError(t, h.st.SetSidecarSet(ss))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"x": "1"}}}
	h.st.SetNamespace(ns)
	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "a-1", Namespace: "sys",
		Labels: map[string]string{v1beta1.SidecarSetNameLabel: "a"}}, Revision: 1, Data: runtime.RawExtension{Raw: []byte(`{"spec":{}}`)}}
	h.st.SetRevision(cr)
	gen := h.st.gen

	status := ss.DeepCopy()
	status.ResourceVersion = "2"
	status.Status.MatchedPods = 10
	status.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kruise"}}
	require.NoError(t, h.st.SetSidecarSet(status))
	nsAnn := ns.DeepCopy()
	nsAnn.Annotations = map[string]string{"note": "x"}
	h.st.SetNamespace(nsAnn)
	h.st.SetRevision(cr.DeepCopy())
	h.st.SetConfigMap(nil) // absent before, absent now
	h.st.DeleteSidecarSet("never-stored")
	assert.Equal(t, gen, h.st.gen)

	latest := status.DeepCopy()
	latest.Status.LatestRevision = "a-1" // written into injected pods: relevant
	require.NoError(t, h.st.SetSidecarSet(latest))
	assert.Equal(t, gen+1, h.st.gen)
	relabel := ns.DeepCopy()
	relabel.Labels["x"] = "2"
	h.st.SetNamespace(relabel)
	assert.Equal(t, gen+2, h.st.gen)
	h.st.DeleteRevision("a-1")
	assert.Equal(t, gen+3, h.st.gen)
}

// An administrator's bundle that does not compile is refused; the previous one keeps serving, the
// replica stays ready, cluster changes keep flowing, and a corrected bundle is activated.
func TestFailingCompileKeepsSnapshot(t *testing.T) {
	h := newHarness(t, Options{})
	require.NoError(t, h.st.RegisterSource("gates"))
	h.start(t)
	h.st.SetClusterSynced()
	require.NoError(t, h.st.SetBundle("gates", readBundle(t, gateFiles("g1", "gate one"))))
	eventually(t, func() bool { return h.st.Ready() == nil }, "ready")
	good := h.eng.Current()
	assert.Equal(t, 1.0, h.activations("gates", resultSuccess))
	assert.Contains(t, h.drainEvents(), `Normal BundleActivated bundle from source gates (revision "g1") activated`)

	require.NoError(t, h.st.SetBundle("gates", readBundle(t, brokenGateFiles("g2"))))
	eventually(t, func() bool { return h.activations("gates", resultFailure) == 1 }, "broken bundle refused")
	assert.Same(t, good, h.eng.Current(), "the fallback compile equals the snapshot in force: no swap")
	require.NoError(t, h.st.Ready())
	assert.Equal(t, []string{"gate one"}, decide(t, h.eng).Denied)
	var evs []string
	eventually(t, func() bool { evs = append(evs, h.drainEvents()...); return len(evs) > 0 }, "Event recorded")
	require.Len(t, evs, 1)
	assert.Contains(t, evs[0], "Warning BundleActivationFailed bundle from source gates refused")
	assert.Contains(t, evs[0], "undefined_function")

	// A SidecarSet change compiles with the previous gates; the broken bundle is not retried.
	require.NoError(t, h.st.SetSidecarSet(sidecarSet("log", map[string]string{"app": "web"})))
	eventually(t, func() bool { _, ok := h.eng.Current().SidecarSet("log"); return ok }, "SidecarSet change served")
	assert.Equal(t, []string{"gate one"}, decide(t, h.eng).Denied)
	assert.Equal(t, 1.0, h.activations("gates", resultFailure), "a rejected bundle is not compiled again")
	assert.Zero(t, h.compiles(resultFailure), "no compile failed as a whole")

	require.NoError(t, h.st.SetBundle("gates", readBundle(t, gateFiles("g3", "gate three"))))
	eventually(t, func() bool { return h.activations("gates", resultSuccess) == 2 }, "fixed bundle activated")
	assert.Equal(t, []string{"gate three"}, decide(t, h.eng).Denied)
	assert.Equal(t, 1.0, testutil.ToFloat64(h.st.metrics.bundleInfo.WithLabelValues("gates", "g3")))
}

// A source's first bundle has no predecessor: if it does not compile the replica stays unready
// rather than serve without the administrator's gates; the next bundle recovers.
func TestFirstBundleFailingKeepsUnready(t *testing.T) {
	h := newHarness(t, Options{})
	require.NoError(t, h.st.RegisterSource("gates"))
	h.start(t)
	h.st.SetClusterSynced()
	require.NoError(t, h.st.SetBundle("gates", readBundle(t, brokenGateFiles("bad"))))
	eventually(t, func() bool { return h.compiles(resultFailure) == 1 }, "compile failed")
	require.ErrorContains(t, h.st.Ready(), "last compile failed")
	require.ErrorContains(t, h.st.Ready(), "undefined_function")
	assert.Nil(t, h.eng.Current())
	assert.Contains(t, strings.Join(h.drainEvents(), "\n"), "Warning PolicyCompileFailed")

	require.NoError(t, h.st.SetBundle("gates", readBundle(t, gateFiles("good", "ok"))))
	eventually(t, func() bool { return h.st.Ready() == nil }, "recovered")
	assert.Equal(t, []string{"ok"}, decide(t, h.eng).Denied)
}

// Two sources claiming the same root: the newcomer is refused, the first keeps serving, and cluster
// changes keep flowing.
func TestOverlappingRootsRefused(t *testing.T) {
	h := newHarness(t, Options{})
	require.NoError(t, h.st.RegisterSource("a"))
	h.start(t)
	h.st.SetClusterSynced()
	require.NoError(t, h.st.SetBundle("a", readBundle(t, gateFiles("a1", "from a"))))
	eventually(t, func() bool { return h.st.Ready() == nil }, "ready")

	// A source registered after the first snapshot does not hold compiles back while it is silent.
	require.NoError(t, h.st.RegisterSource("b"))
	require.NoError(t, h.st.SetSidecarSet(sidecarSet("one", map[string]string{"app": "web"})))
	eventually(t, func() bool { _, ok := h.eng.Current().SidecarSet("one"); return ok }, "served without b")

	require.NoError(t, h.st.SetBundle("b", readBundle(t, gateFiles("b1", "from b"))))
	eventually(t, func() bool { return h.activations("b", resultFailure) == 1 }, "b refused")
	var evs []string
	eventually(t, func() bool {
		evs = append(evs, h.drainEvents()...)
		return strings.Contains(strings.Join(evs, "\n"), "overlaps")
	},
		"Event names the overlap")
	assert.Equal(t, []string{"from a"}, decide(t, h.eng).Denied)
	require.NoError(t, h.st.Ready())

	require.NoError(t, h.st.SetSidecarSet(sidecarSet("two", map[string]string{"app": "web"})))
	eventually(t, func() bool { _, ok := h.eng.Current().SidecarSet("two"); return ok }, "cluster changes flow")
	assert.Zero(t, h.compiles(resultFailure))
}

func whitelistedSidecarSet() *v1beta1.SidecarSet {
	return sidecarSet("patch", map[string]string{"app": "web"}, func(ss *v1beta1.SidecarSet) {
		ss.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{
			Annotations: map[string]string{"logging.example.com/level": "debug"}, PatchPolicy: v1beta1.SidecarSetOverwritePatchPolicy,
		}}
	})
}

func whitelistViolations(t *testing.T, h *harness) []string {
	t.Helper()
	vs, err := h.eng.Current().Whitelist(context.Background(), whitelistedSidecarSet())
	require.NoError(t, err)
	var out []string
	for _, v := range vs {
		out = append(out, v.Type+" "+v.Field)
	}
	return out
}

func kruiseConfig(rv, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: v1beta1.KruiseConfigurationName, Namespace: "kruise-system", ResourceVersion: rv},
		Data:       map[string]string{v1beta1.PatchPodMetadataWhiteListKey: value},
	}
}

// The ConfigMap's whitelist serves while no bundle provides the whitelist root; a bundle wins.
func TestConfigMapWhitelistAndPrecedence(t *testing.T) {
	h := newHarness(t, Options{})
	h.start(t)
	h.st.SetClusterSynced()
	eventually(t, func() bool { return h.st.Ready() == nil }, "ready")
	// No ConfigMap: "whitelist not found".
	assert.Equal(t, []string{"Required spec.patchPodMetadata"}, whitelistViolations(t, h))

	h.st.SetConfigMap(kruiseConfig("1", `{"rules":[{"allowedAnnotationKeyExprs":["^logging\\.example\\.com/"]}]}`))
	eventually(t, func() bool { return len(whitelistViolations(t, h)) == 0 }, "ConfigMap whitelist allows the key")
	eventually(t, func() bool {
		return testutil.ToFloat64(h.st.metrics.bundleInfo.WithLabelValues(ConfigMapSource, "configmap-1")) == 1
	},
		"bundle info names the ConfigMap's version")

	// An invalid value is refused; the previous whitelist keeps serving.
	h.st.SetConfigMap(kruiseConfig("2", `{"rules": 5}`))
	assert.Equal(t, 1.0, h.activations(ConfigMapSource, resultFailure))
	assert.Contains(t, strings.Join(h.drainEvents(), "\n"), "bundle from source kruise-configuration refused")
	assert.Empty(t, whitelistViolations(t, h))

	// A whitelist bundle takes precedence over the ConfigMap.
	require.NoError(t, h.st.RegisterSource("wl"))
	require.NoError(t, h.st.SetBundle("wl", readBundle(t, whitelistFiles("w1", "^other/"))))
	eventually(t, func() bool { return h.activations("wl", resultSuccess) == 1 }, "whitelist bundle activated")
	forbidden := []string{"Forbidden spec.patchPodMetadata[0].annotations[logging.example.com/level]"}
	assert.Equal(t, forbidden, whitelistViolations(t, h), "the bundle's rules, not the ConfigMap's")
	assert.Zero(t, testutil.ToFloat64(h.st.metrics.bundleInfo.WithLabelValues(ConfigMapSource, "configmap-1")), "the ConfigMap no longer serves")

	// Deleting the ConfigMap while the bundle serves changes nothing the policies see.
	before := h.compiles(resultSuccess)
	h.st.SetConfigMap(nil)
	eventually(t, func() bool { return h.compiles(resultSuccess) == before+1 }, "compiled")
	assert.Equal(t, forbidden, whitelistViolations(t, h))
}

func TestDefaultsAllowedReachesConfigMapWhitelist(t *testing.T) {
	h := newHarness(t, Options{DefaultsAllowed: true})
	h.start(t)
	h.st.SetClusterSynced()
	eventually(t, func() bool { return h.st.Ready() == nil }, "ready")
	assert.Empty(t, whitelistViolations(t, h), "no whitelist and the feature gate on: allowed")
}

func TestMetrics(t *testing.T) {
	h := newHarness(t, Options{})
	require.NoError(t, h.st.RegisterSource("gates"))
	h.start(t)
	// Series exist (at zero) before anything happened, so dashboards and alerts see them.
	assert.Equal(t, 0.0, h.activations("gates", resultFailure))
	h.st.SetClusterSynced()
	require.NoError(t, h.st.SetBundle("gates", readBundle(t, gateFiles("g1", "x"))))
	eventually(t, func() bool { return h.st.Ready() == nil }, "ready")

	snap := h.eng.Current()
	assert.Equal(t, 1.0, testutil.ToFloat64(h.st.metrics.snapshotInfo.WithLabelValues(snap.Revision())))
	assert.Equal(t, 1, testutil.CollectAndCount(h.st.metrics.snapshotInfo))
	assert.Equal(t, 1.0, testutil.ToFloat64(h.st.metrics.bundleInfo.WithLabelValues("gates", "g1")))
	assert.Equal(t, 1.0, testutil.ToFloat64(h.st.metrics.bundleInfo.WithLabelValues(ConfigMapSource, "configmap-absent")))
	assert.Greater(t, testutil.ToFloat64(h.st.metrics.lastSuccess), 0.0)
	assert.Equal(t, uint64(1), histogramCount(t, h, resultSuccess))

	// Everything is on the given registry under the documented names.
	n, err := testutil.GatherAndCount(h.reg,
		"sidecarops_policy_compile_duration_seconds", "sidecarops_policy_compiles_total",
		"sidecarops_policy_last_compile_success_timestamp_seconds", "sidecarops_policy_snapshot_info",
		"sidecarops_bundle_activations_total", "sidecarops_bundle_info")
	require.NoError(t, err)
	// histogram, 2 compile results, timestamp, snapshot, 4 activation series (success and failure of
	// gates and of the ConfigMap), 2 bundle infos.
	assert.Equal(t, 1+2+1+1+4+2, n)

	// A second Loader on the same registry shares the collectors instead of failing.
	m, err := NewMetrics(h.reg)
	require.NoError(t, err)
	_, err = New(h.eng, Options{Metrics: m})
	require.NoError(t, err)
}

// Changes the compiled bundle does not record — an injection revision, status.latestRevision — must still reach the objects the snapshot hands to injection, even though the
// policies' revision stays the same and the OPA compile is skipped.
func TestChangesOutsideTheBundleReachInjection(t *testing.T) {
	h := newHarness(t, Options{})
	h.start(t)
	ss := sidecarSet("a", map[string]string{"app": "web"})
	require.NoError(t, h.st.SetSidecarSet(ss))
	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "a-1", Namespace: "sys",
		Labels: map[string]string{v1beta1.SidecarSetNameLabel: "a"}}, Revision: 1, Data: runtime.RawExtension{Raw: []byte(`{"spec":{}}`)}}
	h.st.SetRevision(cr)
	h.st.SetClusterSynced()
	eventually(t, func() bool { return h.st.Ready() == nil }, "ready")
	first := h.eng.Current()

	v := "1"
	changed := ss.DeepCopy()
	changed.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{CustomVersion: &v}
	changed.Status.LatestRevision = "a-1"
	require.NoError(t, h.st.SetSidecarSet(changed))
	eventually(t, func() bool {
		got, ok := h.eng.Current().SidecarSet("a")
		return ok && got.Status.LatestRevision == "a-1" && got.Spec.InjectionStrategy.Revision != nil
	}, "the new SidecarSet served")
	assert.Equal(t, first.Revision(), h.eng.Current().Revision(), "the policies did not change")
}

// A change in a large fleet serves at once from a partial compile (the changed SidecarSet's rules
// apart); once changes have stopped for FoldAfter, the loop folds them into one compile: the same
// revision, nothing apart, the gauge back to 0.
func TestPartialCompileFoldedAfterChangesStop(t *testing.T) {
	// Long enough for the poll below to see the partial snapshot before the fold replaces it, on a
	// loaded machine too (50 ms was missed under make test's race builds).
	h := newHarness(t, Options{FoldAfter: time.Second})
	for i := range 300 {
		require.NoError(t, h.st.SetSidecarSet(sidecarSet(fmt.Sprintf("ss-%03d", i), map[string]string{"app": fmt.Sprint(i)})))
	}
	h.start(t)
	h.st.SetClusterSynced()
	eventually(t, func() bool { return h.st.Ready() == nil }, "first compile")
	require.Equal(t, 0, h.eng.Current().Partial())

	require.NoError(t, h.st.SetSidecarSet(sidecarSet("ss-007", map[string]string{"app": "web"})))
	var partial *engine.Snapshot
	eventually(t, func() bool {
		cur := h.eng.Current()
		if cur.Partial() == 1 {
			partial = cur
		}
		return partial != nil || h.compiles(resultSuccess) >= 2
	}, "the change compiled")
	require.NotNil(t, partial, "the change was served from a partial compile")
	eventually(t, func() bool { return h.eng.Current().Partial() == 0 }, "folded")
	folded := h.eng.Current()
	assert.Equal(t, partial.Revision(), folded.Revision())
	assert.Equal(t, 0.0, testutil.ToFloat64(h.st.metrics.partial))
	d, err := folded.Decide(context.Background(), "shop", podJSON(t, map[string]string{"app": "web"}, false))
	require.NoError(t, err)
	assert.Equal(t, []string{"ss-007"}, d.MatchedNames())
}

// TestHoldsTheInformersObjects: a SidecarSet as the API server stores it once the defaulting
// webhook admitted it (decoded from its JSON, as the informer does) is held as the informer's very
// object, not a copy; one stored without defaults or hashes (created while no webhook ran) is held
// as a defaulted copy, the informer's object left as it was. A ControllerRevision is held as it is.
func TestHoldsTheInformersObjects(t *testing.T) {
	h := newHarness(t, Options{})
	cache, err := informerCache(apiServerJSON(t, 2))
	require.NoError(t, err)
	stored := cache.List()
	admitted := stored[0].(*v1beta1.SidecarSet)
	bare := stored[1].(*v1beta1.SidecarSet)
	bare.Annotations = nil
	bare.Spec.UpdateStrategy = v1beta1.SidecarSetUpdateStrategy{}
	before := bare.DeepCopy()
	require.NoError(t, h.st.SetSidecarSet(admitted))
	require.NoError(t, h.st.SetSidecarSet(bare))
	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: admitted.Name + "-1", Labels: map[string]string{v1beta1.SidecarSetNameLabel: admitted.Name}}, Revision: 1}
	h.st.SetRevision(cr)

	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	assert.Same(t, admitted, h.st.sidecarSets[admitted.Name], "an admitted SidecarSet is held once")
	held := h.st.sidecarSets[bare.Name]
	assert.NotSame(t, bare, held)
	assert.NotEmpty(t, held.Annotations[v1beta1.SidecarSetHashAnnotation], "the copy is hashed")
	assert.Equal(t, v1beta1.RollingUpdateSidecarSetStrategyType, held.Spec.UpdateStrategy.Type, "the copy is defaulted")
	assert.Equal(t, before, bare, "the informer's object is left as it was")
	assert.Same(t, cr, h.st.revisions[cr.Name])
}
