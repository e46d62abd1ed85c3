package loader

import (
	"context"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

const managerNS = "sidecarops-system"

// fakeInformers serves real shared informers over fake list-watch sources: the feed is exercised
// with initial lists, sync and watch events, without an API server.
type fakeInformers struct {
	cache.Informers // only GetInformer is used
	informers       map[reflect.Type]toolscache.SharedIndexInformer
	sources         map[reflect.Type]*fcache.FakeControllerSource
}

func newFakeInformers(t *testing.T, objs ...client.Object) *fakeInformers {
	t.Helper()
	f := &fakeInformers{informers: map[reflect.Type]toolscache.SharedIndexInformer{}, sources: map[reflect.Type]*fcache.FakeControllerSource{}}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	for _, kind := range []client.Object{&v1beta1.SidecarSet{}, &corev1.Namespace{}, &appsv1.ControllerRevision{}, &corev1.ConfigMap{}} {
		src := fcache.NewFakeControllerSource()
		t.Cleanup(src.Shutdown)
		typ := reflect.TypeOf(kind)
		f.sources[typ] = src
		f.informers[typ] = toolscache.NewSharedIndexInformer(src, kind, 0, toolscache.Indexers{})
	}
	for _, o := range objs {
		f.source(o).Add(o)
	}
	for _, inf := range f.informers {
		go inf.Run(stop)
	}
	return f
}

func (f *fakeInformers) source(o client.Object) *fcache.FakeControllerSource {
	return f.sources[reflect.TypeOf(o)]
}

func (f *fakeInformers) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	return f.informers[reflect.TypeOf(obj)], nil
}

func revision(name, ns string, owner string) *appsv1.ControllerRevision {
	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Revision: 1,
		Data: runtime.RawExtension{Raw: []byte(`{"spec":{}}`)}}
	if owner != "" {
		cr.Labels = map[string]string{v1beta1.SidecarSetNameLabel: owner}
	}
	return cr
}

func TestFeedFromInformers(t *testing.T) {
	wl := kruiseConfig("1", `{"rules":[{"allowedAnnotationKeyExprs":["^logging\\.example\\.com/"]}]}`)
	wl.Namespace = managerNS
	otherCM := wl.DeepCopy()
	otherCM.Name = "something-else"
	otherCM.Data[v1beta1.PatchPodMetadataWhiteListKey] = `{"rules": 5}` // would be refused if read
	ss := sidecarSet("log", map[string]string{"app": "web"})
	infs := newFakeInformers(t,
		ss,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"team": "a"}}},
		revision("log-1", managerNS, "log"),
		revision("ds-1", managerNS, ""),       // a DaemonSet's revision: not ours
		revision("log-x", "elsewhere", "log"), // outside the manager's namespace
		wl, otherCM,
	)
	h := newHarness(t, Options{})
	h.start(t)
	f := &feed{st: h.st, cache: infs, handlers: newHandlers(h.st, managerNS, managerNS)}
	assert.False(t, f.NeedLeaderElection())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	eventually(t, func() bool { return h.st.Ready() == nil }, "ready after the initial lists")
	snap := h.eng.Current()
	_, ok := snap.SidecarSet("log")
	assert.True(t, ok, "SidecarSet from the initial list")
	_, ok = snap.History().ByName("log-1")
	assert.True(t, ok)
	_, ok = snap.History().ByName("ds-1")
	assert.False(t, ok, "revisions without the SidecarSet label are not read")
	_, ok = snap.History().ByName("log-x")
	assert.False(t, ok, "revisions outside the manager's namespace are not read")
	assert.Empty(t, whitelistViolations(t, h), "kruise-configuration's whitelist serves")
	assert.Zero(t, h.activations(ConfigMapSource, resultFailure), "other ConfigMaps are not read")

	// Watch events: a delete, a revision losing its label, the ConfigMap deleted.
	infs.source(ss).Delete(ss)
	relabelled := revision("log-1", managerNS, "")
	relabelled.ResourceVersion = "2"
	infs.source(relabelled).Modify(relabelled)
	infs.source(wl).Delete(wl)
	eventually(t, func() bool {
		snap := h.eng.Current()
		_, hasSS := snap.SidecarSet("log")
		_, hasRev := snap.History().ByName("log-1")
		return !hasSS && !hasRev && len(whitelistViolations(t, h)) == 1
	}, "deletions served")
	assert.Equal(t, []string{"Required spec.patchPodMetadata"}, whitelistViolations(t, h))
}

func TestHandlersTombstones(t *testing.T) {
	h := newHarness(t, Options{})
	hs := newHandlers(h.st, managerNS, managerNS)
	byType := map[reflect.Type]toolscache.ResourceEventHandler{}
	for _, k := range hs {
		byType[reflect.TypeOf(k.obj)] = k.handler
	}
	ssH := byType[reflect.TypeOf(&v1beta1.SidecarSet{})]
	ss := sidecarSet("a", map[string]string{"app": "web"})
	ssH.OnAdd(ss, true)
	require.Contains(t, h.st.sidecarSets, "a")
	ssH.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "a", Obj: ss})
	require.NotContains(t, h.st.sidecarSets, "a")
	ssH.OnAdd("not an object", false) // ignored, no panic

	// The cache's objects are shared: the Loader stores a defaulted copy and leaves them alone.
	ssH.OnUpdate(nil, ss)
	assert.Empty(t, ss.Annotations, "the informer's object is not modified")
	assert.NotEmpty(t, h.st.sidecarSets["a"].Annotations[v1beta1.SidecarSetHashAnnotation])

	nsH := byType[reflect.TypeOf(&corev1.Namespace{})]
	nsH.OnAdd(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, false)
	nsH.OnDelete(toolscache.DeletedFinalStateUnknown{Obj: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n"}}})
	assert.Empty(t, h.st.namespaces)

	crH := byType[reflect.TypeOf(&appsv1.ControllerRevision{})]
	crH.OnAdd(revision("r", managerNS, "a"), false)
	crH.OnDelete(revision("r", "elsewhere", "a")) // same name, other namespace: not ours
	assert.Contains(t, h.st.revisions, "r")
	crH.OnDelete(toolscache.DeletedFinalStateUnknown{Obj: revision("r", managerNS, "a")})
	assert.Empty(t, h.st.revisions)
}

// With --revision-namespace, revisions are taken from there and only from there; the whitelist
// ConfigMap still from the manager's namespace.
func TestHandlersRevisionNamespace(t *testing.T) {
	h := newHarness(t, Options{})
	byType := map[reflect.Type]toolscache.ResourceEventHandler{}
	for _, k := range newHandlers(h.st, managerNS, "kruise-system") {
		byType[reflect.TypeOf(k.obj)] = k.handler
	}
	crH := byType[reflect.TypeOf(&appsv1.ControllerRevision{})]
	crH.OnAdd(revision("ours", managerNS, "a"), false)
	assert.Empty(t, h.st.revisions, "the manager's namespace is not where revisions are kept")
	crH.OnAdd(revision("kruise", "kruise-system", "a"), false)
	assert.Contains(t, h.st.revisions, "kruise")
	crH.OnDelete(revision("kruise", managerNS, "a"))
	assert.Contains(t, h.st.revisions, "kruise", "same name in another namespace: not ours")
	crH.OnDelete(revision("kruise", "kruise-system", "a"))
	assert.Empty(t, h.st.revisions)
}

func TestCacheByObject(t *testing.T) {
	by := CacheByObject(managerNS, "kruise-system")
	require.Len(t, by, 2)
	for obj, o := range by {
		switch obj.(type) {
		case *appsv1.ControllerRevision:
			assert.Equal(t, map[string]cache.Config{"kruise-system": {}}, o.Namespaces, "revisions where --revision-namespace says")
			assert.True(t, o.Label.Matches(labels.Set{v1beta1.SidecarSetNameLabel: "x"}))
			assert.False(t, o.Label.Matches(labels.Set{"controller.kubernetes.io/hash": "x"}))
		case *corev1.ConfigMap:
			assert.Equal(t, map[string]cache.Config{managerNS: {}}, o.Namespaces, "the whitelist in the manager's namespace")
			assert.True(t, o.Field.Matches(fields.Set{"metadata.name": v1beta1.KruiseConfigurationName}))
			assert.False(t, o.Field.Matches(fields.Set{"metadata.name": "other"}))
		default:
			t.Errorf("unexpected %T", obj)
		}
	}
}

// SetupWithManager wires without an API server (nothing is started here; the e2e tests start it).
func TestSetupWithManager(t *testing.T) {
	newManager := func(scheme *runtime.Scheme) manager.Manager {
		mgr, err := manager.New(&rest.Config{Host: "https://127.0.0.1:1"}, manager.Options{
			Scheme:                 scheme,
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
		})
		require.NoError(t, err)
		return mgr
	}
	plain := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(plain))
	h := newHarness(t, Options{})
	require.ErrorContains(t, SetupWithManager(newManager(plain), h.st, ManagerOptions{Namespace: managerNS}), "lacks SidecarSet")
	require.ErrorContains(t, SetupWithManager(newManager(plain), h.st, ManagerOptions{}), "Namespace is required")

	full := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(full))
	require.NoError(t, v1beta1.AddToScheme(full))
	h = newHarness(t, Options{})
	h.st.events, h.st.eventObject = nil, nil // let SetupWithManager choose
	require.NoError(t, SetupWithManager(newManager(full), h.st, ManagerOptions{Namespace: managerNS, PodName: "mgr-0", PodUID: "u-1"}))
	assert.NotNil(t, h.st.events)
	pod, ok := h.st.eventObject.(*corev1.Pod)
	require.True(t, ok, "Events go to this replica's Pod")
	assert.Equal(t, "mgr-0", pod.Name)
	assert.Equal(t, managerNS, pod.Namespace)
	assert.EqualValues(t, "u-1", pod.UID)

	// Without POD_NAME (a manager run outside a Pod), the Events still land in the manager's
	// namespace: on its Lease, not on the cluster-scoped Namespace (whose Events go to "default").
	h = newHarness(t, Options{})
	h.st.events, h.st.eventObject = nil, nil
	require.ErrorContains(t, SetupWithManager(newManager(full), h.st, ManagerOptions{Namespace: managerNS}), "PodName or Lease")
	require.NoError(t, SetupWithManager(newManager(full), h.st, ManagerOptions{Namespace: managerNS, Lease: "sidecarops-manager"}))
	lease, ok := h.st.eventObject.(*coordinationv1.Lease)
	require.True(t, ok, "Events go to the manager's Lease")
	assert.Equal(t, "sidecarops-manager", lease.Name)
	assert.Equal(t, managerNS, lease.Namespace)
}
