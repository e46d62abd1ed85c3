package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	admissionv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/manager"
	"github.com/sidecarops/sidecarops/webhook/prefilter"
)

// registeredCondition is the prefilter's filter on the pod webhook's registration as one CEL
// condition ("" when there is none), and the field manager that owns it.
func registeredCondition(t *testing.T) (expr, owner string) {
	t.Helper()
	var m admissionregv1.MutatingWebhookConfiguration
	require.NoError(t, cluster.Client.Get(ctx(t), client.ObjectKey{Name: manager.WebhookConfigurationName}, &m))
	f, found := prefilter.Registered(&m, manager.PodWebhookName)
	require.True(t, found, "no pod webhook %s", manager.PodWebhookName)
	return f.CEL(), filterOwner(&m)
}

// filterOwner is the field manager of the match condition or of a non-empty object selector.
func filterOwner(m *admissionregv1.MutatingWebhookConfiguration) string {
	for _, f := range m.ManagedFields {
		if f.FieldsV1 == nil {
			continue
		}
		if raw := f.FieldsV1.GetRawString(); strings.Contains(raw, prefilter.ConditionName) || strings.Contains(raw, `"f:objectSelector"`) {
			return f.Manager
		}
	}
	return ""
}

// The manager keeps a match condition on the pod webhook's registration, so the API server sends
// the webhook only the pods some SidecarSet may inject into; the condition follows SidecarSets as
// they come and go, and turning the prefilter off removes it.
func TestPodWebhookPrefilter(t *testing.T) {
	namespace(t, "e2e-prefilter", nil)
	ss := sidecarSet("e2e-prefilter", map[string]string{"app": "prefiltered"}, "prefilter-agent")
	require.NoError(t, cluster.Client.Create(ctx(t), ss))
	waitInjected(t, pod("e2e-prefilter", "probe", map[string]string{"app": "prefiltered"}), "prefilter-agent")
	expr, owner := registeredCondition(t)
	assert.Contains(t, expr, `"prefiltered"`)
	assert.Equal(t, prefilter.FieldOwner, owner, "the condition is server-side applied by its own field manager")

	// Which pods reach the webhook, counted by its own latency histogram (this process serves it).
	create := func(name, app string) (*corev1.Pod, uint64) {
		t.Helper()
		_, before := podHandlerTime(t)
		p := pod("e2e-prefilter", name, map[string]string{"app": app})
		require.NoError(t, cluster.Client.Create(ctx(t), p))
		_, after := podHandlerTime(t)
		return p, after - before
	}
	p, calls := create("unselected", "elsewhere")
	assert.Zero(t, calls, "the API server called the webhook for a pod no SidecarSet selects")
	assert.Equal(t, []string{"app"}, containerNames(p))
	p, calls = create("selected", "prefiltered")
	assert.Equal(t, uint64(1), calls)
	assert.Equal(t, []string{"prefilter-agent", "app"}, containerNames(p))

	// Deleting the SidecarSet takes its pods out of the condition.
	require.NoError(t, cluster.Client.Delete(ctx(t), ss))
	eventually(t, "the condition forgets the deleted SidecarSet", func() error {
		if expr, _ := registeredCondition(t); strings.Contains(expr, `"prefiltered"`) {
			return fmt.Errorf("condition still %s", expr)
		}
		return nil
	})

	// Off, the manager removes the condition it left; back on, it restores it.
	restart := func(off bool) {
		t.Helper()
		cluster.Manager.NoPodWebhookPrefilter = off
		cluster.Manager.RestartableInProcess = true
		require.NoError(t, cluster.RestartManager(context.Background()))
	}
	t.Cleanup(func() {
		if cluster.Manager.NoPodWebhookPrefilter {
			restart(false)
		}
	})
	restart(true)
	eventually(t, "the condition removed", func() error {
		if expr, _ := registeredCondition(t); expr != "" {
			return fmt.Errorf("condition still %s", expr)
		}
		return nil
	})
	_, calls = create("unfiltered", "elsewhere")
	assert.Equal(t, uint64(1), calls, "without the prefilter every pod is sent")
	restart(false)
	eventually(t, "the condition restored", func() error {
		if expr, _ := registeredCondition(t); expr == "" {
			return fmt.Errorf("no condition")
		}
		return nil
	})
}

// SidecarSets applied together (a GitOps sync, a Helm release) are admitted together: each widens
// the pod webhook's condition before it is stored, and none is refused because another one's write
// came first. Before, 614 of 1,000 SidecarSets created 16 at a time were refused with a conflict.
// Past the widenings' rate the condition sends every pod instead of naming each (decision D9).
func TestSidecarSetsAdmittedConcurrently(t *testing.T) {
	const n, inFlight = 48, 16
	namespace(t, "e2e-concurrent", nil)
	t.Cleanup(func() {
		for i := range n {
			_ = cluster.Client.Delete(context.Background(), &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("e2e-concurrent-%d", i)}})
		}
	})
	errs := devcluster.Parallel(n, inFlight, func(i int) error {
		ss := sidecarSet("e2e-concurrent", map[string]string{"app": fmt.Sprintf("concurrent-%d", i)}, fmt.Sprintf("concurrent-agent-%d", i))
		ss.Name = fmt.Sprintf("e2e-concurrent-%d", i)
		return cluster.Client.Create(context.Background(), ss)
	})
	require.Empty(t, errs, "every SidecarSet admitted")
	expr, _ := registeredCondition(t)
	if expr == "true" {
		return
	}
	for i := range n {
		assert.Contains(t, expr, fmt.Sprintf(`"concurrent-%d"`, i), "the condition selects every admitted SidecarSet's pods")
	}
}

// fleetView is the API server's client, except that it lists the given SidecarSets: the e2e
// cluster holds every other test's too, and the form of the filter depends on the whole fleet.
type fleetView struct {
	client.Client
	sets []v1beta1.SidecarSet
}

func (f fleetView) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if l, ok := list.(*v1beta1.SidecarSetList); ok {
		l.Items = f.sets
		return nil
	}
	return f.Client.List(ctx, list, opts...)
}

// filterRegistration creates a registration of a pod-less webhook that only holds a filter.
func filterRegistration(t *testing.T, name, webhook string) *admissionregv1.MutatingWebhookConfiguration {
	t.Helper()
	cfg := &admissionregv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregv1.MutatingWebhook{{
			Name:                    webhook,
			AdmissionReviewVersions: []string{"v1"},
			ClientConfig:            admissionregv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9/never-called")},
			// A resource nobody creates: this registration only holds a filter.
			Rules: []admissionregv1.RuleWithOperations{{
				Operations: []admissionregv1.OperationType{admissionregv1.Create},
				Rule:       admissionregv1.Rule{APIGroups: []string{"e2e.sidecarops.io"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}},
			}},
			SideEffects:   ptr.To(admissionregv1.SideEffectClassNone),
			FailurePolicy: ptr.To(admissionregv1.Ignore),
		}},
	}
	require.NoError(t, cluster.Client.Create(ctx(t), cfg))
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), cfg) })
	return cfg
}

// The filter as the API server stores it: an object selector alone when it says everything, a
// condition when it cannot, each replaced by the other as the fleet changes, a widening turning
// the selector into a condition, an administrator's object selector left theirs; and a filter
// reconciled again writes nothing.
func TestPodWebhookFilterOnTheAPIServer(t *testing.T) {
	const name, webhook = "e2e-filter", "mpod.e2e-filter.sidecarops.io"
	cfg := filterRegistration(t, name, webhook)

	web := *sidecarSet("e2e-filter-web", map[string]string{"app": "web"}, "agent")
	api := *sidecarSet("e2e-filter-api", map[string]string{"app": "api"}, "agent")
	tiered := *sidecarSet("e2e-filter-tier", map[string]string{"tier": "front"}, "agent")
	read := func() (prefilter.Filter, *admissionregv1.MutatingWebhookConfiguration) {
		t.Helper()
		var m admissionregv1.MutatingWebhookConfiguration
		require.NoError(t, cluster.Client.Get(ctx(t), client.ObjectKey{Name: name}, &m))
		f, found := prefilter.Registered(&m, webhook)
		require.True(t, found)
		return f, &m
	}
	settle := func(sets ...v1beta1.SidecarSet) (prefilter.Filter, *admissionregv1.MutatingWebhookConfiguration) {
		t.Helper()
		r := &prefilter.Reconciler{Client: fleetView{cluster.Client, sets}, Configuration: name, Webhook: webhook}
		_, err := r.Reconcile(ctx(t), reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		require.NoError(t, err)
		f, m := read()
		// Again, from what it wrote: nothing to write.
		_, err = r.Reconcile(ctx(t), reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		require.NoError(t, err)
		_, again := read()
		require.Equal(t, m.ResourceVersion, again.ResourceVersion, "a second reconcile rewrote the registration")
		return f, m
	}
	in := func(key string, values ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpIn, Values: values}}}
	}

	f, m := settle(web)
	assert.Equal(t, prefilter.Filter{Selector: in("app", "web")}, f, "one SidecarSet: its selector, no condition")
	assert.Equal(t, prefilter.FieldOwner, filterOwner(m))

	f, _ = settle(web, api)
	assert.Equal(t, prefilter.Filter{Selector: in("app", "api", "web")}, f, "one label listing values: still a selector alone")

	f, _ = settle(web, tiered)
	assert.Nil(t, f.Selector, "nothing both require: no selector")
	assert.Contains(t, f.Expression, `"web"`)
	assert.Contains(t, f.Expression, `"front"`)

	// A SidecarSet admitted while the selector is registered: the filter becomes the condition of
	// both, which the next reconcile keeps while the admitted term is fresh.
	settle(web)
	w := &prefilter.Widener{Reader: cluster.Client, Writer: cluster.Client, Configuration: name, Webhook: webhook}
	require.NoError(t, w.Widen(ctx(t), &tiered, nil))
	f, _ = read()
	assert.Nil(t, f.Selector, "a selector cannot say or")
	assert.Contains(t, f.Expression, `"web"`)
	assert.Contains(t, f.Expression, `"front"`)
	f, _ = settle(web)
	assert.Nil(t, f.Selector)
	assert.Contains(t, f.Expression, `"front"`, "the admitted term is kept for its grace period")

	// An administrator's object selector: left as it is, the prefilter keeps to its condition.
	admin := admissionv1ac.MutatingWebhookConfiguration(name).WithWebhooks(admissionv1ac.MutatingWebhook().WithName(webhook).
		WithObjectSelector(metav1ac.LabelSelector().WithMatchExpressions(metav1ac.LabelSelectorRequirement().
			WithKey("sidecarops.io/skip").WithOperator(metav1.LabelSelectorOpDoesNotExist))))
	// A fresh registration, without the admitted term.
	require.NoError(t, cluster.Client.Delete(ctx(t), &admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	cfg.ResourceVersion = ""
	require.NoError(t, cluster.Client.Create(ctx(t), cfg))
	require.NoError(t, cluster.Client.Apply(ctx(t), admin, client.FieldOwner("e2e-admin"), client.ForceOwnership))
	f, _ = settle(web)
	want := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "sidecarops.io/skip", Operator: metav1.LabelSelectorOpDoesNotExist}}}
	assert.Equal(t, want, f.Selector, "the administrator's selector stays")
	assert.Contains(t, f.Expression, `"web"`, "the prefilter filters by condition")
}

// countedWriter counts the registration's writes.
type countedWriter struct {
	client.Writer
	applies atomic.Int64
}

func (w *countedWriter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	w.applies.Add(1)
	return w.Writer.Apply(ctx, obj, opts...)
}

// Issue 28, item 3: 1,282 made-up SidecarSets posted straight to the validating path each widened
// the condition, 1,325 writes of the registration at 44 a second. Widenings are rate-limited:
// past the burst the condition sends every pod, written once, and nothing more is written (decision
// D9).
func TestWideningsUnderAFlood(t *testing.T) {
	const name, webhook = "e2e-flood", "mpod.e2e-flood.sidecarops.io"
	filterRegistration(t, name, webhook)
	web := *sidecarSet("e2e-flood-web", map[string]string{"app": "web"}, "agent")
	_, err := (&prefilter.Reconciler{Client: fleetView{cluster.Client, []v1beta1.SidecarSet{web}}, Configuration: name, Webhook: webhook}).
		Reconcile(ctx(t), reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	require.NoError(t, err)
	writes := &countedWriter{Writer: cluster.Client}
	var now atomic.Pointer[time.Time]
	start := time.Now()
	now.Store(&start)
	w := &prefilter.Widener{Reader: cluster.Client, Writer: writes, Configuration: name, Webhook: webhook, Now: func() time.Time { return *now.Load() }}
	madeUp := func(i int) error {
		return w.Widen(ctx(t), sidecarSet(fmt.Sprintf("made-up-%d", i), map[string]string{"app": fmt.Sprintf("a%d", i)}, "agent"), nil)
	}

	// The probe's flood, 16 at a time.
	const flood = 1282
	var g errgroup.Group
	g.SetLimit(16)
	for i := range flood {
		g.Go(func() error { return madeUp(i) })
	}
	require.NoError(t, g.Wait())
	t.Logf("%d made-up SidecarSets widened with %d writes of the registration", flood, writes.applies.Load())
	assert.LessOrEqual(t, writes.applies.Load(), int64(prefilter.DefaultWidenBurst+1), "writes of the registration")
	var m admissionregv1.MutatingWebhookConfiguration
	require.NoError(t, cluster.Client.Get(ctx(t), client.ObjectKey{Name: name}, &m))
	f, _ := prefilter.Registered(&m, webhook)
	assert.Equal(t, "true", f.Expression, "past the rate, every pod is sent")
	assert.Contains(t, m.Annotations[prefilter.AdmittedAnnotation], `"sidecarSet":"*"`)

	// The flood going on, one review a second for three minutes: at most two writes a minute.
	before := writes.applies.Load()
	for i := range 180 {
		at := start.Add(time.Duration(i+1) * time.Second)
		now.Store(&at)
		require.NoError(t, madeUp(flood+i))
	}
	t.Logf("180 more, one a second: %d writes", writes.applies.Load()-before)
	assert.LessOrEqual(t, writes.applies.Load()-before, int64(2*3), "writes while the flood goes on")
}
