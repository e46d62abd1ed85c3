package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// fakeLister serves lists and watches of ConfigMaps from a list the test sets, as an API server
// would: a streaming list (initial events, then the bookmark that ends them) or a plain list,
// then the watch the test drives.
type fakeLister struct {
	watchList bool

	mu    sync.Mutex
	items []corev1.ConfigMap
	rv    string
	// listErr fails the next list once.
	listErr error
	w       *watch.FakeWatcher
	watches chan *watch.FakeWatcher
}

func newFakeLister(watchList bool, rv string, items ...corev1.ConfigMap) *fakeLister {
	return &fakeLister{watchList: watchList, rv: rv, items: items, watches: make(chan *watch.FakeWatcher, 16)}
}

// IsWatchListSemanticsUnSupported tells the Reflector whether to list with a watch.
func (f *fakeLister) IsWatchListSemanticsUnSupported() bool { return !f.watchList }

func (f *fakeLister) set(rv string, items ...corev1.ConfigMap) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv, f.items = rv, items
}

func (f *fakeLister) List(o metav1.ListOptions) (runtime.Object, error) {
	return f.ListWithContext(context.Background(), o)
}

func (f *fakeLister) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return f.WatchWithContext(context.Background(), o)
}

func (f *fakeLister) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.listErr; err != nil {
		f.listErr = nil
		return nil, err
	}
	return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: f.rv}, Items: slices.Clone(f.items)}, nil
}

func (f *fakeLister) WatchWithContext(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := watch.NewFakeWithChanSize(len(f.items)+64, false)
	if o.SendInitialEvents != nil && *o.SendInitialEvents {
		for n := range f.items {
			w.Add(f.items[n].DeepCopy())
		}
		w.Action(watch.Bookmark, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: f.rv,
			Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
	}
	f.w = w
	f.watches <- w
	return w, nil
}

// nextWatch is the watch the informer opens next.
func (f *fakeLister) nextWatch(t *testing.T) *watch.FakeWatcher {
	t.Helper()
	select {
	case w := <-f.watches:
		return w
	case <-time.After(10 * time.Second):
		t.Fatal("the informer opened no watch")
		return nil
	}
}

func configMap(name, rv, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}, Data: map[string]string{"v": value}}
}

// eventLog is a handler that writes down what it is called with, and the objects as it sees them.
type eventLog struct {
	mu     sync.Mutex
	events []string
	seen   map[string]string
}

func describe(obj any) string {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return o.Name + "=" + o.Data["v"]
	case toolscache.DeletedFinalStateUnknown:
		return "unknown(" + describe(o.Obj) + ")"
	}
	return fmt.Sprintf("%T", obj)
}

func (l *eventLog) OnAdd(obj any, initial bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf("add %s initial=%t", describe(obj), initial))
	l.see(obj)
}

func (l *eventLog) OnUpdate(old, obj any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, "update "+describe(old)+" -> "+describe(obj))
	l.see(obj)
}

func (l *eventLog) OnDelete(obj any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, "delete "+describe(obj))
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	delete(l.seen, obj.(*corev1.ConfigMap).Name)
}

func (l *eventLog) see(obj any) {
	if l.seen == nil {
		l.seen = map[string]string{}
	}
	cm := obj.(*corev1.ConfigMap)
	l.seen[cm.Name] = cm.Data["v"]
}

func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

// upper is a transform that marks what it transformed.
func upper(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return obj, nil
	}
	cm = cm.DeepCopy()
	cm.Data["v"] = strings.ToUpper(cm.Data["v"])
	return cm, nil
}

// runInformer starts i and waits for its first list.
func runInformer(t *testing.T, i *inlineInformer) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		i.RunWithContext(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	require.True(t, toolscache.WaitForCacheSync(ctx.Done(), i.HasSynced))
	return cancel
}

// The informer's life, over a streaming list and over a plain one: the initial list, a handler
// added late, watch events, a relist after the watch expired, a handler removed, and the informer
// stopped. Each change is in the store and has reached every handler before the next event is
// read: the handlers' calls are checked as soon as the store shows the change.
func TestInlineInformer(t *testing.T) {
	for _, watchList := range []bool{true, false} {
		t.Run(fmt.Sprintf("watchList=%t", watchList), func(t *testing.T) {
			lw := newFakeLister(watchList, "10", *configMap("a", "5", "a1"), *configMap("b", "6", "b1"))
			inf := newInlineInformer(lw, &corev1.ConfigMap{}, toolscache.Indexers{"value": func(obj any) ([]string, error) {
				return []string{obj.(*corev1.ConfigMap).Data["v"]}, nil
			}})
			require.NoError(t, inf.SetTransform(upper))
			early := &eventLog{}
			earlyReg, err := inf.AddEventHandler(early)
			require.NoError(t, err)
			assert.False(t, earlyReg.HasSynced())

			cancel := runInformer(t, inf)
			w := lw.nextWatch(t)
			assert.True(t, earlyReg.HasSynced(), "the handler had the first list when the informer synced")
			assert.ElementsMatch(t, []string{"add a=A1 initial=true", "add b=B1 initial=true"}, early.take())
			assert.Equal(t, "10", inf.LastSyncResourceVersion())
			require.Error(t, inf.SetTransform(upper), "the transform is fixed once the informer runs")
			require.Error(t, inf.SetWatchErrorHandler(func(*toolscache.Reflector, error) {}))

			late := &eventLog{}
			lateReg, err := inf.AddEventHandler(late)
			require.NoError(t, err)
			assert.True(t, lateReg.HasSynced(), "a handler added after the first list is given the store at once")
			assert.ElementsMatch(t, []string{"add a=A1 initial=true", "add b=B1 initial=true"}, late.take())

			// waitFor waits until the store holds what want says (name=value, or name absent).
			waitFor := func(name, value string) {
				t.Helper()
				require.Eventually(t, func() bool {
					obj, ok, err := inf.GetStore().GetByKey("ns/" + name)
					require.NoError(t, err)
					if value == "" {
						return !ok
					}
					return ok && obj.(*corev1.ConfigMap).Data["v"] == value
				}, 10*time.Second, time.Millisecond)
			}
			w.Add(configMap("c", "11", "c1"))
			waitFor("c", "C1")
			want := []string{"add c=C1 initial=false"}
			assert.Equal(t, want, early.take())
			assert.Equal(t, want, late.take())
			w.Modify(configMap("a", "12", "a2"))
			waitFor("a", "A2")
			want = []string{"update a=A1 -> a=A2"}
			assert.Equal(t, want, early.take())
			assert.Equal(t, want, late.take())
			byValue, err := inf.GetIndexer().ByIndex("value", "A2")
			require.NoError(t, err)
			assert.Len(t, byValue, 1, "indexes follow the store")
			w.Delete(configMap("b", "13", "b2"))
			waitFor("b", "")
			want = []string{"delete b=B2"}
			assert.Equal(t, want, early.take())
			assert.Equal(t, want, late.take())

			// The watch expires; the relist finds a changed, c gone and d new.
			require.NoError(t, inf.RemoveEventHandler(lateReg))
			require.Error(t, inf.RemoveEventHandler(nil), "a registration of another informer is refused")
			lw.set("20", *configMap("a", "15", "a3"), *configMap("d", "16", "d1"))
			w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired})
			lw.nextWatch(t)
			waitFor("c", "")
			waitFor("d", "D1")
			assert.ElementsMatch(t, []string{"update a=A2 -> a=A3", "add d=D1 initial=false", "delete unknown(c=C1)"}, early.take())
			assert.Empty(t, late.take(), "a removed handler is not called")
			keys := inf.GetStore().ListKeys()
			slices.Sort(keys)
			assert.Equal(t, []string{"ns/a", "ns/d"}, keys)

			cancel()
			require.Eventually(t, inf.IsStopped, 10*time.Second, time.Millisecond)
			_, err = inf.AddEventHandler(&eventLog{})
			require.Error(t, err, "a stopped informer takes no handler")
			require.Error(t, inf.AddIndexers(toolscache.Indexers{"other": toolscache.MetaNamespaceIndexFunc}))
		})
	}
}

// A list that fails is reported to the watch error handler, and the informer lists again.
func TestInlineInformerWatchError(t *testing.T) {
	lw := newFakeLister(false, "1", *configMap("a", "1", "a1"))
	lw.listErr = errors.New("the API server is away")
	inf := newInlineInformer(lw, &corev1.ConfigMap{}, nil)
	reported := make(chan error, 1)
	require.NoError(t, inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		select {
		case reported <- err:
		default:
		}
	}))
	runInformer(t, inf)
	require.ErrorContains(t, <-reported, "the API server is away")
	assert.Equal(t, []string{"ns/a"}, inf.GetStore().ListKeys())
}

// A handler added while events flow sees each object once, as the store has it: its additions
// replayed from the store and the events after them, none missed or twice (run with -race).
func TestInlineInformerHandlerAddedWhileRunning(t *testing.T) {
	lw := newFakeLister(false, "1")
	inf := newInlineInformer(lw, &corev1.ConfigMap{}, nil)
	runInformer(t, inf)
	w := lw.nextWatch(t)
	const objects = 300
	go func() {
		for n := range objects {
			w.Add(configMap(fmt.Sprint("cm-", n), fmt.Sprint(2+2*n), "v1"))
			w.Modify(configMap(fmt.Sprint("cm-", n), fmt.Sprint(3+2*n), "v2"))
		}
	}()
	time.Sleep(time.Millisecond)
	l := &eventLog{}
	_, err := inf.AddEventHandler(l)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(inf.GetStore().ListKeys()) == objects }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool {
		for _, obj := range inf.GetStore().List() {
			if obj.(*corev1.ConfigMap).Data["v"] != "v2" {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond)
	adds := map[string]int{}
	for _, e := range l.take() {
		if name, ok := strings.CutPrefix(e, "add "); ok {
			adds[strings.Split(name, "=")[0]]++
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Len(t, l.seen, objects)
	for name, v := range l.seen {
		assert.Equal(t, "v2", v, name)
		assert.Equal(t, 1, adds[name], "%s added once", name)
	}
}
