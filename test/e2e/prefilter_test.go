package e2e

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	admissionv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/podwebhook"
	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/manager"
	"github.com/sidecarops/sidecarops/webhook/prefilter"
)

// registeredCondition is the prefilter's filter on the pod webhook's registration as one CEL
// condition ("" when there is none), and the field manager that owns it.
func registeredCondition(t *testing.T) (expr, owner string) {
	t.Helper()
	f, m := registeredFilter(t, manager.WebhookConfigurationName, manager.PodWebhookName)
	return f.CEL(), filterOwner(m)
}

// filterOwner is the field manager of the match condition or of a non-empty object selector.
func filterOwner(m *admissionregv1.MutatingWebhookConfiguration) string {
	for _, f := range m.ManagedFields {
		if f.FieldsV1 == nil {
			continue
		}
		if raw := f.FieldsV1.GetRawString(); strings.Contains(raw, podwebhook.ConditionName) || strings.Contains(raw, `"f:objectSelector"`) {
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
		return registeredFilter(t, name, webhook)
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
// past the burst the condition sends every pod, written once, and refreshed once a minute while the
// flood goes on (decision D9).
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

	// The flood going on, one review a second for three minutes: the collapse refreshed once a
	// minute (every half grace), nothing else written.
	before := writes.applies.Load()
	for i := range 180 {
		at := start.Add(time.Duration(i+1) * time.Second)
		now.Store(&at)
		require.NoError(t, madeUp(flood+i))
	}
	t.Logf("180 more, one a second: %d writes", writes.applies.Load()-before)
	assert.LessOrEqual(t, writes.applies.Load()-before, int64(3), "writes while the flood goes on")
}

// writeLog records the resourceVersion of each registration a writer applied, so that a watch's
// changes can be told apart: the Widener and the Reconciler apply as one field manager, which
// managedFields cannot split.
type writeLog struct {
	mu  sync.Mutex
	rvs map[string]string // resourceVersion written → writer
}

func (l *writeLog) writer(who string, c client.Client) *loggedWriter {
	return &loggedWriter{Client: c, who: who, log: l}
}

func (l *writeLog) of(rv string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return cmp.Or(l.rvs[rv], "another writer")
}

type loggedWriter struct {
	client.Client
	who string
	log *writeLog
}

func (w *loggedWriter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := w.Client.Apply(ctx, obj, opts...); err != nil {
		return err
	}
	// Apply reads the stored object back into the configuration.
	if rv := obj.(*admissionv1ac.MutatingWebhookConfigurationApplyConfiguration).ResourceVersion; rv != nil {
		w.log.mu.Lock()
		w.log.rvs[*rv] = w.who
		w.log.mu.Unlock()
	}
	return nil
}

// Issue 35, item 7: the probe's flood of made-up SidecarSet reviews, 41,398 in 30 s, made 26 writes
// of the registration where decision D9 allows 16 + 1. The flood runs here as long and as fast,
// with the elected replica's Reconciler running as the manager runs it (its own cache, watching
// the registration); a watch counts every change of the registration, each told apart by the
// resourceVersion its writer got back. Then a second replica, its rate untouched, joins the flood.
func TestRegistrationWritesUnderAFlood(t *testing.T) {
	const name, webhook = "e2e-flood-live", "mpod.e2e-flood-live.sidecarops.io"
	const duration, perSecond = 30 * time.Second, 1400
	filterRegistration(t, name, webhook)
	writes := &writeLog{rvs: map[string]string{}}

	scheme, err := manager.Scheme()
	require.NoError(t, err)
	mgr, err := ctrl.NewManager(cluster.Config, ctrl.Options{
		Scheme:     scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{ByObject: prefilter.CacheByObject(name)},
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)}, // the suite's manager runs one too
	})
	require.NoError(t, err)
	web := *sidecarSet("e2e-flood-live-web", map[string]string{"app": "web"}, "agent")
	elected := &prefilter.Reconciler{Client: fleetView{writes.writer("the reconciler", mgr.GetClient()), []v1beta1.SidecarSet{web}}, Configuration: name, Webhook: webhook}
	require.NoError(t, elected.SetupWithManager(mgr))
	mgrCtx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stop()
		assert.NoError(t, <-stopped)
	})
	eventually(t, "the reconciler's filter registered", func() error {
		if f, _ := registeredFilter(t, name, webhook); f.Selector == nil {
			return fmt.Errorf("no selector yet: %+v", f)
		}
		return nil
	})

	watcher, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	_, from := registeredFilter(t, name, webhook)
	changes, err := watcher.Watch(ctx(t), &admissionregv1.MutatingWebhookConfigurationList{},
		client.MatchingFields{"metadata.name": name}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: from.ResourceVersion}})
	require.NoError(t, err)
	defer changes.Stop()
	counted := map[string]int{}
	count := func(quiet time.Duration) {
		t.Helper()
		for {
			select {
			case e := <-changes.ResultChan():
				require.Equal(t, watch.Modified, e.Type, "%v", e.Object)
				counted[writes.of(e.Object.(*admissionregv1.MutatingWebhookConfiguration).ResourceVersion)]++
			case <-time.After(quiet):
				return
			}
		}
	}
	total := func() (n int) {
		for _, c := range counted {
			n += c
		}
		return n
	}

	flood := func(w *prefilter.Widener, d time.Duration, first int) int {
		var sent atomic.Int64
		pace := rate.NewLimiter(perSecond, 16)
		floodCtx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		var g errgroup.Group
		for range 16 {
			g.Go(func() error {
				for pace.Wait(floodCtx) == nil {
					i := first + int(sent.Add(1))
					ss := sidecarSet(fmt.Sprintf("made-up-%d", i), map[string]string{"app": fmt.Sprintf("m%d", i)}, "agent")
					if err := w.Widen(context.Background(), ss, nil); err != nil {
						return err
					}
				}
				return nil
			})
		}
		require.NoError(t, g.Wait())
		return int(sent.Load())
	}
	replica := func(who string) *prefilter.Widener {
		return &prefilter.Widener{Reader: cluster.Client, Writer: writes.writer(who, cluster.Client), Configuration: name, Webhook: webhook}
	}

	sent := flood(replica("the flooded replica"), duration, 0)
	count(3 * time.Second) // the reconciler's answer to the last widenings included
	t.Logf("%d made-up SidecarSets in %s: %d writes of the registration %v", sent, duration, total(), counted)
	assert.LessOrEqual(t, total(), prefilter.DefaultWidenBurst+1, "writes of the registration over the flood, the reconciler's included")
	assert.Zero(t, counted["the reconciler"], "the reconciler wrote back what a widening had written")
	assert.Zero(t, counted["another writer"])
	f, m := registeredFilter(t, name, webhook)
	assert.Equal(t, prefilter.Filter{Expression: "true"}, f, "past the rate, every pod is sent")
	assert.Contains(t, m.Annotations[prefilter.AdmittedAnnotation], `"sidecarSet":"*"`)

	// Another replica, its burst unspent: every pod is sent already, for long enough.
	before := total()
	sent = flood(replica("the second replica"), 3*time.Second, sent)
	count(3 * time.Second)
	t.Logf("%d more to a second replica: %d writes %v", sent, total()-before, counted)
	assert.Zero(t, total()-before, "writes by a second replica while every pod is sent")
}

// registeredFilter is the prefilter's filter on the named registration, and its resourceVersion.
func registeredFilter(t *testing.T, name, webhook string) (prefilter.Filter, *admissionregv1.MutatingWebhookConfiguration) {
	t.Helper()
	var m admissionregv1.MutatingWebhookConfiguration
	require.NoError(t, cluster.Client.Get(ctx(t), client.ObjectKey{Name: name}, &m))
	f, found := prefilter.Registered(&m, webhook)
	require.True(t, found, "no webhook %s in %s", webhook, name)
	return f, &m
}
