package controller

import (
	"context"
	"fmt"
	"reflect"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/randomobjects"
)

// trimmed is p as the pod cache keeps it: metadata without managedFields; the containers' names,
// images and restart policies; the node; the phase, conditions and container statuses. It is the
// specification the records are held to (TestCompactPod, TestPodInformer) and the controller's
// decisions are checked on (TestCachedPod).
func trimmed(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	pod := p.DeepCopy()
	pod.ManagedFields = nil
	trim := func(cs []corev1.Container) []corev1.Container {
		if cs == nil {
			return nil
		}
		out := make([]corev1.Container, len(cs))
		for i, c := range cs {
			out[i] = corev1.Container{Name: c.Name, Image: c.Image, RestartPolicy: c.RestartPolicy}
		}
		return out
	}
	pod.Spec = corev1.PodSpec{Containers: trim(pod.Spec.Containers), InitContainers: trim(pod.Spec.InitContainers), NodeName: pod.Spec.NodeName}
	pod.Status = corev1.PodStatus{Phase: pod.Status.Phase, Conditions: pod.Status.Conditions,
		ContainerStatuses: pod.Status.ContainerStatuses, InitContainerStatuses: pod.Status.InitContainerStatuses}
	return pod
}

// A compact record gives back exactly the trimmed pod it was made of, for pods filled at random
// (every field, nil and empty lists alike), and its deep copy is a record equal to it that shares
// nothing with it.
func TestCompactPod(t *testing.T) {
	fill := randomobjects.Filler(t, 1)
	var pool labelPool
	for range 500 {
		var p corev1.Pod
		fill.Fill(&p)
		want := trimmed(t, &p)
		rec := compact(want)
		require.True(t, reflect.DeepEqual(want, rec.pod()), "the record's pod differs from the trimmed pod:\n%#v\n%#v", want, rec.pod())
		shared := compact(trimmed(t, &p)).interned(&pool)
		require.True(t, reflect.DeepEqual(want, shared.pod()), "the interned record's pod differs from the trimmed pod:\n%#v\n%#v", want, shared.pod())

		cp, ok := rec.DeepCopyObject().(*compactPod)
		require.True(t, ok)
		require.True(t, reflect.DeepEqual(rec, cp))
		if len(cp.Labels) > 0 {
			for k := range cp.Labels {
				cp.Labels[k] += "-changed"
			}
			require.False(t, reflect.DeepEqual(rec.Labels, cp.Labels), "the copy shares its labels with the original")
		}
	}
}

// Records of pods with equal labels share one map, whatever order the labels came in; other labels
// get a map of their own; no labels and empty labels stay as they were. A label set leaves the pool
// once no record holds it.
func TestLabelPool(t *testing.T) {
	var pool labelPool
	rec := func(labels map[string]string) *compactPod {
		return compact(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Labels: labels}}).interned(&pool)
	}
	same := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	// Go does not promise an order to map literals: the two are built in opposite orders.
	ab := map[string]string{"app": "web", "pod-template-hash": "5d9c"}
	ba := make(map[string]string, 2)
	ba["pod-template-hash"] = "5d9c"
	ba["app"] = "web"
	web1, web2 := rec(ab), rec(ba)
	assert.True(t, same(web1.Labels, web2.Labels), "equal labels, one map")
	assert.False(t, same(ab, web1.Labels), "the pool's map is its own, not the decoded one")
	assert.Equal(t, ab, web1.Labels)

	// Keys and values are told apart by their lengths, not by a separator a label could hold.
	tricky := rec(map[string]string{"app": "web", "pod-template-has": "h5d9c"})
	assert.False(t, same(web1.Labels, tricky.Labels))
	assert.Equal(t, "h5d9c", tricky.Labels["pod-template-has"])
	other := rec(map[string]string{"app": "db"})
	assert.False(t, same(web1.Labels, other.Labels))
	assert.Equal(t, map[string]string{"app": "db"}, other.Labels)
	assert.Nil(t, rec(nil).Labels)
	empty := rec(map[string]string{})
	assert.NotNil(t, empty.Labels)
	assert.Empty(t, empty.Labels)
	assert.Equal(t, 3, pool.size())

	// A copy of a record (client-go's mutation detector makes them) shares nothing.
	cp := web1.DeepCopyObject().(*compactPod)
	assert.False(t, same(web1.Labels, cp.Labels))

	goruntime.KeepAlive(web2)
	web1, web2, tricky, other = nil, nil, nil, nil
	require.Eventually(t, func() bool {
		goruntime.GC()
		return pool.size() == 0
	}, 10*time.Second, 10*time.Millisecond, "label sets no record holds are dropped")
}

// The pod informer, run over a watch: its store holds records, and everything that
// reads it — the indexer the cache's client reads, the indexes, the event handlers — gets the
// trimmed pods.
func TestPodInformer(t *testing.T) {
	w := watch.NewFakeWithChanSize(8, false)
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
		},
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				// A streaming list: no pods yet, and the bookmark that ends the initial events.
				w.Action(watch.Bookmark, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1",
					Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
			}
			return w, nil
		},
	}
	inf := NewPods().NewInformer(lw, &corev1.Pod{}, 0, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	require.IsType(t, &podInformer{}, inf)
	require.NoError(t, inf.SetTransform(cache.TransformStripManagedFields()))
	require.NoError(t, inf.AddIndexers(toolscache.Indexers{"by-list": func(obj any) ([]string, error) {
		return injectedBy(obj.(*compactPod)), nil
	}}))

	var mu sync.Mutex
	var events []string
	record := func(kind string, objs ...any) {
		mu.Lock()
		defer mu.Unlock()
		for _, o := range objs {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			p, ok := o.(*corev1.Pod)
			if !assert.True(t, ok, "%s handed a %T", kind, o) {
				return
			}
			events = append(events, kind+" "+p.Name+" "+p.Spec.Containers[0].Image)
		}
	}
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { record("add", o) },
		UpdateFunc: func(old, o any) { record("update", old, o) },
		DeleteFunc: func(o any) { record("delete", o) },
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.RunWithContext(ctx)
	require.True(t, toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced))

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0", ResourceVersion: "2",
			Annotations:   map[string]string{"kruise.io/sidecarset-injected-list": "log"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "log", Image: "log:1", Env: []corev1.EnvVar{{Name: "A"}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "log", Image: "log:1", ImageID: "sha256:l1", Ready: true}}},
	}
	w.Add(pod.DeepCopy())
	next := pod.DeepCopy()
	next.ResourceVersion, next.Spec.Containers[0].Image = "3", "log:2"
	w.Modify(next.DeepCopy())
	require.Eventually(t, func() bool {
		_, ok, _ := inf.GetIndexer().GetByKey("ns/web-0")
		item, _, _ := inf.GetStore().GetByKey("ns/web-0")
		return ok && item.(*corev1.Pod).ResourceVersion == "3"
	}, 10*time.Second, 10*time.Millisecond)

	stored := inf.(*podInformer).SharedIndexInformer.GetIndexer().List()
	require.Len(t, stored, 1)
	assert.IsType(t, &compactPod{}, stored[0], "the store holds the record")
	want := trimmed(t, next)
	item, _, err := inf.GetIndexer().GetByKey("ns/web-0")
	require.NoError(t, err)
	assert.Equal(t, want, item)
	item, _, err = inf.GetIndexer().Get(next)
	require.NoError(t, err)
	assert.Equal(t, want, item)
	assert.Equal(t, []any{want}, inf.GetIndexer().List())
	byNS, err := inf.GetIndexer().ByIndex(toolscache.NamespaceIndex, "ns")
	require.NoError(t, err)
	assert.Equal(t, []any{want}, byNS)
	byList, err := inf.GetIndexer().ByIndex("by-list", "log")
	require.NoError(t, err)
	assert.Equal(t, []any{want}, byList)
	indexed, err := inf.GetIndexer().Index("by-list", stored[0])
	require.NoError(t, err)
	assert.Equal(t, []any{want}, indexed)

	w.Delete(next.DeepCopy())
	require.Eventually(t, func() bool { return len(inf.GetStore().ListKeys()) == 0 }, 10*time.Second, 10*time.Millisecond)
	// Handlers are called from client-go's queue, after the store has changed.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(events) == 4
	}, 10*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"add web-0 log:1", "update web-0 log:1", "update web-0 log:2", "delete web-0 log:2"}, events)

	// A deletion whose final state was not seen carries the record inside.
	gone, ok := expanded(toolscache.DeletedFinalStateUnknown{Key: "ns/web-0", Obj: compact(want)}).(toolscache.DeletedFinalStateUnknown)
	require.True(t, ok)
	assert.Equal(t, want, gone.Obj)
}

// Informers of other kinds are client-go's own.
func TestNewInformerOtherKinds(t *testing.T) {
	_, isPods := NewPods().NewInformer(&toolscache.ListWatch{}, &corev1.Namespace{}, 0, toolscache.Indexers{}).(*podInformer)
	assert.False(t, isPods)
}

// benchmarkPod is the i-th pod of a ReplicaSet as the API server sends it after injection, with
// the managedFields it keeps.
func benchmarkPod(i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("web-5d9c7b8f4-%05d", i), GenerateName: "web-5d9c7b8f4-",
			UID: types.UID(fmt.Sprintf("0b5e1a47-3c1d-4a8e-9f2b-%012d", i)), ResourceVersion: fmt.Sprint(1000 + i),
			Labels: map[string]string{"app": "web", "tier": "frontend", "pod-template-hash": "5d9c7b8f4"},
			Annotations: map[string]string{
				"kruise.io/sidecarset-hash":               `{"log":{"updateTimestamp":"2026-11-27T08:00:00Z","hash":"2vxz8v2d9w6f4x8c6z5b7c","sidecarSetName":"log","sidecarList":["log"],"controllerRevision":"log-6d4f8b9c7"}}`,
				"kruise.io/sidecarset-hash-without-image": `{"log":{"updateTimestamp":"2026-11-27T08:00:00Z","hash":"8c6z5b7c2vxz8v2d9w6f4x","sidecarSetName":"log","sidecarList":["log"],"controllerRevision":"log-6d4f8b9c7"}}`,
				"kruise.io/sidecarset-injected-list":      "log",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d9c7b8f4", UID: "7f3e"}},
			// The ReplicaSet controller's and the kubelet's entries, as the API server keeps them.
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &metav1.Time{Time: time.Unix(1795000000, 0)},
					FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{},"f:tier":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"7f3e\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`)},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Subresource: "status", Time: &metav1.Time{Time: time.Unix(1795000002, 0)},
					FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.0.0.7\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`)},
			},
		},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{
			{Name: "log", Image: "example.com/log:1"}, {Name: "web", Image: "example.com/web:1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// What the pod informer's transform costs per watch event, for a pod of a ReplicaSet as the API
// server sends it after injection: the pod decoded from its protobuf, as client-go's decoder does,
// then made an interned record.
//
//	go test ./controller/ -run '^$' -bench PodRecord -benchmem
func BenchmarkPodRecord(b *testing.B) {
	wire := make([][]byte, 1000)
	for i := range wire {
		data, err := benchmarkPod(i).Marshal()
		if err != nil {
			b.Fatal(err)
		}
		wire[i] = data
	}
	inf := NewPods().NewInformer(&toolscache.ListWatch{}, &corev1.Pod{}, 0, toolscache.Indexers{}).(*podInformer)
	transform := inf.transform(cache.TransformStripManagedFields())
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		pod := &corev1.Pod{}
		if err := pod.Unmarshal(wire[i%len(wire)]); err != nil {
			b.Fatal(err)
		}
		i++
		if _, err := transform(pod); err != nil {
			b.Fatal(err)
		}
	}
}

// Pods relies on client-go calling the informer's transform for every pod version before the store
// holds it and before any handler sees it (SetTransform's and TransformFunc's documented contract),
// except for a deletion found by relisting, which only the Delete handler reports (as a tombstone).
// This runs a real shared informer through add, update, delete and a relist that finds a pod gone,
// and fails if client-go stops keeping to that order.
func TestTransformSeesEveryVersionFirst(t *testing.T) {
	ss := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "log", UID: "u", Generation: 1}}
	pods := NewPods()
	pods.tr.reset(ss, nil, "rev-1", 0, time.Unix(0, 0)) // tracked: marks are kept
	source := fcache.NewFakeControllerSource()
	inf := pods.NewInformer(source, &corev1.Pod{}, 0, toolscache.Indexers{}).(*podInformer)
	require.NoError(t, inf.SetTransform(nil))

	var mu sync.Mutex
	transformed := map[string]bool{} // the versions the transform saw, by "name@resourceVersion"
	calls := map[string]int{}        // the transform's calls, by pod name
	var problems []string
	marks := inf.seen
	inf.seen = func(p *corev1.Pod) {
		mu.Lock()
		defer mu.Unlock()
		if stored, ok, _ := inf.GetStore().GetByKey(p.Namespace + "/" + p.Name); ok && stored.(*corev1.Pod).ResourceVersion == p.ResourceVersion {
			problems = append(problems, "the store held "+p.Name+"@"+p.ResourceVersion+" before the transform saw it")
		}
		transformed[p.Name+"@"+p.ResourceVersion] = true
		calls[p.Name]++
		marks(p)
	}
	events := make(chan string, 16)
	handled := func(kind string, obj any) {
		tombstone := ""
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj, tombstone = d.Obj, " (tombstone)"
		}
		p := obj.(*corev1.Pod)
		mu.Lock()
		seen := transformed[p.Name+"@"+p.ResourceVersion]
		mu.Unlock()
		events <- fmt.Sprintf("%s %s transformed first: %v%s", kind, p.Name, seen, tombstone)
	}
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { handled("add", obj) },
		UpdateFunc: func(_, obj any) { handled("update", obj) },
		DeleteFunc: func(obj any) { handled("delete", obj) },
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.RunWithContext(ctx)
	require.True(t, toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced))

	pod := func(name, image string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: map[string]string{v1beta1.SidecarSetListAnnotation: ss.Name}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "sidecar", Image: image}}},
		}
	}
	next := func() string {
		select {
		case e := <-events:
			return e
		case <-time.After(10 * time.Second):
			return "no event"
		}
	}
	source.Add(pod("a", "s:1"))
	assert.Equal(t, "add a transformed first: true", next())
	source.Modify(pod("a", "s:2"))
	assert.Equal(t, "update a transformed first: true", next())
	last := pod("a", "s:2")
	source.Delete(last)
	assert.Equal(t, "delete a transformed first: true", next())
	// The transform marked each version for the SidecarSet the pod names, the deletion's last.
	assert.Equal(t, mark{resourceVersion: last.ResourceVersion}, pods.tr.sets[ss.Name].dirty[types.NamespacedName{Namespace: "ns", Name: "a"}])

	source.Add(pod("b", "s:1"))
	assert.Equal(t, "add b transformed first: true", next())
	source.DeleteDropWatch(pod("b", "s:1"))
	source.ResetWatch() // the informer relists, and finds b gone
	// The tombstone holds the version stored last; the transform saw nothing of the deletion,
	// which is why the Delete handler marks pods.
	assert.Equal(t, "delete b transformed first: true (tombstone)", next())
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, calls["b"], "the transform saw b's deletion")
	assert.Empty(t, problems)
}

// The pod informer and its store wrap client-go's interfaces, overriding the methods that hand
// out stored objects (which would otherwise be compact records) or take what is handed them (event
// handlers, the transform); every other method is promoted from client-go's informer. A method
// client-go adds that hands out objects would be promoted too, and fail only when called: this
// fails instead, naming it. A method is covered when the wrapper declares it itself (a promoted
// method is a compiler-generated wrapper, whose source file is "<autogenerated>").
func TestPodInformerCoversClientGo(t *testing.T) {
	safe := map[reflect.Type]bool{ // interfaces that hand out no stored object
		reflect.TypeFor[error](): true,
		reflect.TypeFor[toolscache.ResourceEventHandlerRegistration](): true,
		reflect.TypeFor[toolscache.Controller]():                       true,
		reflect.TypeFor[toolscache.DoneChecker]():                      true,
	}
	handsOut := func(m reflect.Method) bool {
		for i := range m.Type.NumOut() {
			out := m.Type.Out(i)
			if out.Kind() == reflect.Slice {
				out = out.Elem()
			}
			if out.Kind() == reflect.Interface && !safe[out] {
				return true
			}
		}
		for i := range m.Type.NumIn() {
			in := m.Type.In(i)
			if in == reflect.TypeFor[toolscache.ResourceEventHandler]() || in == reflect.TypeFor[toolscache.TransformFunc]() {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		iface, wrapper reflect.Type
	}{
		{reflect.TypeFor[toolscache.SharedIndexInformer](), reflect.TypeFor[*podInformer]()},
		{reflect.TypeFor[toolscache.Indexer](), reflect.TypeFor[podIndexer]()},
	} {
		var covered, found []string
		for i := range tc.iface.NumMethod() {
			m := tc.iface.Method(i)
			if !handsOut(m) {
				continue
			}
			found = append(found, m.Name)
			impl, ok := tc.wrapper.MethodByName(m.Name)
			require.True(t, ok, "%v has no %s", tc.wrapper, m.Name)
			fn := goruntime.FuncForPC(impl.Func.Pointer())
			if file, _ := fn.FileLine(fn.Entry()); strings.HasSuffix(file, "podcache.go") {
				covered = append(covered, m.Name)
			}
		}
		assert.Equal(t, found, covered, "%v: methods of %v that hand out stored objects or take handlers, and those it declares", tc.wrapper, tc.iface)
		assert.NotEmpty(t, found, "the rule finds nothing in %v", tc.iface)
	}
}
