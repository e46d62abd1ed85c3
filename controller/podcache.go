package controller

import (
	goruntime "runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unique"
	"weak"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// Pods is the pod cache as the controller needs it: the manager's cache builds its informers with
// Pods.NewInformer, and the Reconciler, given the same Pods, learns of every pod version from the
// pod informer's transform. client-go calls the transform for each object about to be stored,
// before any other actor sees it (SharedIndexInformer.SetTransform, TransformFunc): a pod is
// marked for counting before any list can show its new version, which keeps the status counts'
// recount check exact (tracker.reset). TestTransformSeesEveryVersionFirst holds client-go to it.
type Pods struct {
	tr *tracker
	// made is set once the pod informer was built here: a cache built without Pods.NewInformer
	// would leave the counts unmarked, and SetupWithManager refuses it.
	made atomic.Bool
}

// NewPods is a pod cache for one Reconciler.
func NewPods() *Pods { return &Pods{tr: newTracker()} }

// NewInformer is the manager cache's informer constructor (cache.Options.NewInformer): client-go's
// shared informer over the ListerWatcher the cache gives it, and for pods one that keeps each pod
// compacted in its store. A *corev1.Pod is a 1,240-byte struct before any of its fields, and its
// trimmed containers 408 bytes each, for every pod of the cluster (BenchmarkManagerMemory).
// Everything that reads the informer — the cache's client, its index lookups, the event handlers —
// still gets a *corev1.Pod, made from the compact record when it is read
// (compactPod.pod), so nothing of the controller changes.
func (p *Pods) NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	inf := toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	if _, ok := obj.(*corev1.Pod); !ok {
		return inf
	}
	p.made.Store(true)
	return &podInformer{SharedIndexInformer: inf, seen: p.seen}
}

// seen marks a pod version the informer is about to store for the SidecarSets it names.
func (p *Pods) seen(pod *corev1.Pod) {
	p.tr.touch(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, mark{resourceVersion: pod.ResourceVersion}, injectedBy(pod))
}

// compactPod is a pod as the pod informer stores it: what the controller reads of it (the
// metadata without managedFields; the containers' names, images and restart policies; the node;
// the phase, conditions and container statuses), and nothing of the pod struct around it. The
// rest of a pod — volumes, env, resources, probes, scheduling — is often most of it, and the
// controller writes pods only by patching what it changed (writePod, setUpgradable), so nothing
// left out is ever written back. pod() gives that trimmed pod back, field for field (TestCompactPod). Index
// functions see the record itself, which is a client.Object: they read its metadata.
type compactPod struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	containers, initContainers []containerRef
	nodeName                   string
	phase                      corev1.PodPhase
	conditions                 []corev1.PodCondition
	statuses, initStatuses     []corev1.ContainerStatus
	// labels keeps ObjectMeta.Labels's map alive in its pool while this record holds it (interned).
	labels *sharedLabels
}

// containerRef is what the record keeps of a container.
type containerRef struct {
	name, image   string
	restartPolicy *corev1.ContainerRestartPolicy
}

func compactContainers(cs []corev1.Container) []containerRef {
	if cs == nil {
		return nil
	}
	out := make([]containerRef, len(cs))
	for i := range cs {
		out[i] = containerRef{name: cs[i].Name, image: cs[i].Image, restartPolicy: cs[i].RestartPolicy}
	}
	return out
}

func expandContainers(refs []containerRef) []corev1.Container {
	if refs == nil {
		return nil
	}
	out := make([]corev1.Container, len(refs))
	for i, r := range refs {
		out[i] = corev1.Container{Name: r.name, Image: r.image, RestartPolicy: r.restartPolicy}
	}
	return out
}

// compact is the record of pod: what it keeps of it, sharing the pod's maps and lists.
func compact(pod *corev1.Pod) *compactPod {
	meta := pod.ObjectMeta
	meta.ManagedFields = nil
	return &compactPod{
		TypeMeta:       pod.TypeMeta,
		ObjectMeta:     meta,
		containers:     compactContainers(pod.Spec.Containers),
		initContainers: compactContainers(pod.Spec.InitContainers),
		nodeName:       pod.Spec.NodeName,
		phase:          pod.Status.Phase,
		conditions:     pod.Status.Conditions,
		statuses:       pod.Status.ContainerStatuses,
		initStatuses:   pod.Status.InitContainerStatuses,
	}
}

// pod is the trimmed pod the record was made of. Its metadata's maps and its status lists are the
// record's own, as an informer's objects are shared: readers deep-copy before changing anything.
func (c *compactPod) pod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   c.TypeMeta,
		ObjectMeta: c.ObjectMeta,
		Spec: corev1.PodSpec{
			Containers:     expandContainers(c.containers),
			InitContainers: expandContainers(c.initContainers),
			NodeName:       c.nodeName,
		},
		Status: corev1.PodStatus{
			Phase:                 c.phase,
			Conditions:            c.conditions,
			ContainerStatuses:     c.statuses,
			InitContainerStatuses: c.initStatuses,
		},
	}
}

// DeepCopyObject copies the record as a record, as runtime.Object requires (client-go's cache
// mutation detector compares a copy with the original).
func (c *compactPod) DeepCopyObject() runtime.Object {
	return compact(c.pod().DeepCopy())
}

// expanded is obj as the informer's readers expect it: a record made a pod again, also inside a
// deletion whose final state was not seen.
func expanded(obj any) any {
	switch o := obj.(type) {
	case *compactPod:
		return o.pod()
	case toolscache.DeletedFinalStateUnknown:
		o.Obj = expanded(o.Obj)
		return o
	}
	return obj
}

// expandedAll expands objs in place: the store's readers return a new slice each time.
func expandedAll(objs []any) []any {
	for i := range objs {
		objs[i] = expanded(objs[i])
	}
	return objs
}

// podInformer stores compact records (its transform ends in compact, interned) and gives out pods.
type podInformer struct {
	toolscache.SharedIndexInformer
	labels labelPool
	// seen hears of each pod version before it is stored (nil: nobody listens).
	seen func(*corev1.Pod)
}

// interned is the record with what pods have in common held once: its labels map shared with
// every other record of the informer whose labels are equal (a ReplicaSet's pods carry the same
// labels; a map of a few is ≈ 300 bytes), and its namespace, generateName, owners' references,
// annotation keys and containers' names and images canonical strings. Records are never
// changed in place — an informer's objects are shared by all readers already — so sharing them
// further changes nothing a reader can see.
func (c *compactPod) interned(labels *labelPool) *compactPod {
	c.Namespace = intern(c.Namespace)
	c.GenerateName = intern(c.GenerateName)
	c.Labels, c.labels = labels.share(c.Labels)
	if c.Annotations != nil {
		// Keys only: values such as the SidecarSets' hash annotations carry a per-pod timestamp.
		m := make(map[string]string, len(c.Annotations))
		for k, v := range c.Annotations {
			m[intern(k)] = v
		}
		c.Annotations = m
	}
	for i := range c.OwnerReferences {
		o := &c.OwnerReferences[i]
		o.APIVersion, o.Kind, o.Name, o.UID = intern(o.APIVersion), intern(o.Kind), intern(o.Name), types.UID(intern(string(o.UID)))
	}
	for _, cs := range [][]containerRef{c.containers, c.initContainers} {
		for i := range cs {
			cs[i].name, cs[i].image = intern(cs[i].name), intern(cs[i].image)
		}
	}
	return c
}

// intern is s's canonical copy: held once however many records hold it, and freed with the last.
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// labelPool holds one map per set of labels some record has, for as long as one has it.
type labelPool struct {
	mu   sync.Mutex
	maps map[string]weak.Pointer[sharedLabels]
}

// sharedLabels is a pooled labels map; the records holding the map hold it too, so that it stays
// in the pool exactly as long as the map is in use.
type sharedLabels struct{ m map[string]string }

// share is the pool's map equal to m (m itself, pooled, if none is) and what holds it there.
// Empty maps are left as they are: nil and empty differ to a reader.
func (p *labelPool) share(m map[string]string) (map[string]string, *sharedLabels) {
	if len(m) == 0 {
		return m, nil
	}
	// A pod's labels are few: the key is built on the stack.
	var keyArray [16]string
	var buf [512]byte
	keys, b := keyArray[:0], buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = strconv.AppendInt(b, int64(len(k)), 10)
		b = append(b, ':')
		b = append(b, k...)
		b = strconv.AppendInt(b, int64(len(m[k])), 10)
		b = append(b, ':')
		b = append(b, m[k]...)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if held := p.maps[string(b)].Value(); held != nil {
		return held.m, held
	}
	// Keys only: a value unique to the pod (a StatefulSet's pod name) would cost unique's table
	// more than it saves, and the values of a shared map are held once anyway.
	own := make(map[string]string, len(m))
	for _, k := range keys {
		own[intern(k)] = m[k]
	}
	held, key := &sharedLabels{m: own}, string(b)
	if p.maps == nil {
		p.maps = map[string]weak.Pointer[sharedLabels]{}
	}
	p.maps[key] = weak.Make(held)
	goruntime.AddCleanup(held, p.forget, key)
	return own, held
}

// forget drops key once its map is no longer held; a map pooled again under key since is kept.
func (p *labelPool) forget(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.maps[key].Value() == nil {
		delete(p.maps, key)
	}
}

// size is the number of label sets pooled.
func (p *labelPool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.maps)
}

func (i *podInformer) SetTransform(f toolscache.TransformFunc) error {
	return i.SharedIndexInformer.SetTransform(i.transform(f))
}

// transform is f, the cache's transform, followed by making a pod an interned record.
func (i *podInformer) transform(f toolscache.TransformFunc) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		if f != nil {
			var err error
			if obj, err = f(obj); err != nil {
				return nil, err
			}
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			if i.seen != nil {
				i.seen(pod)
			}
			return compact(pod).interned(&i.labels), nil
		}
		return obj, nil
	}
}

func (i *podInformer) GetStore() toolscache.Store { return i.GetIndexer() }

func (i *podInformer) GetIndexer() toolscache.Indexer {
	return podIndexer{i.SharedIndexInformer.GetIndexer()}
}

func (i *podInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(podHandler{h})
}

func (i *podInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(podHandler{h}, resync)
}

func (i *podInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithOptions(podHandler{h}, o)
}

// podIndexer is the store's reading side, giving out pods; writes are the informer's own.
type podIndexer struct {
	toolscache.Indexer
}

func (x podIndexer) List() []any { return expandedAll(x.Indexer.List()) }

func (x podIndexer) Get(obj any) (any, bool, error) {
	item, exists, err := x.Indexer.Get(obj)
	return expanded(item), exists, err
}

func (x podIndexer) GetByKey(key string) (any, bool, error) {
	item, exists, err := x.Indexer.GetByKey(key)
	return expanded(item), exists, err
}

func (x podIndexer) Index(name string, obj any) ([]any, error) {
	items, err := x.Indexer.Index(name, obj)
	return expandedAll(items), err
}

func (x podIndexer) ByIndex(name, value string) ([]any, error) {
	items, err := x.Indexer.ByIndex(name, value)
	return expandedAll(items), err
}

// podHandler hands an event handler pods.
type podHandler struct {
	h toolscache.ResourceEventHandler
}

func (p podHandler) OnAdd(obj any, initial bool) { p.h.OnAdd(expanded(obj), initial) }
func (p podHandler) OnUpdate(old, obj any)       { p.h.OnUpdate(expanded(old), expanded(obj)) }
func (p podHandler) OnDelete(obj any)            { p.h.OnDelete(expanded(obj)) }
