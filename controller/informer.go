package controller

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// inlineInformer is a SharedIndexInformer without client-go's queues: its Reflector (client-go's
// own, with its lists, relists after 410 Gone, bookmarks and backoff) writes each change into the
// indexer and calls the event handlers on the Reflector's own goroutine, before it reads the next
// event. client-go's shared informer hands every event from the Reflector to a FIFO, from the FIFO
// to a processor and from the processor to each handler's listener, each on a goroutine of its
// own. A pod brings the manager two watch events, and in a scale-up those hand-offs and the
// wake-ups between them were about a tenth of the manager's CPU (docs/benchmarks.md, "The pod
// informer's own queue and connections").
//
// What that costs: a handler that blocks holds up the watch, so handlers must only enqueue work, as
// controller-runtime's do; and a handler is never called with an unchanged object (no resync:
// every handler of the pod informer ignores an update that does not change the resourceVersion).
// Its store and indexes are client-go's (toolscache.NewIndexer), so readers and index functions
// see exactly what they see with client-go's informer.
type inlineInformer struct {
	lw      toolscache.ListerWatcher
	objType runtime.Object
	indexer toolscache.Indexer

	// mu orders the store's changes, the handlers' calls and the handlers' registrations: a handler
	// added while the informer runs is given the store's objects as they are, then every change
	// after them, none twice or missed.
	mu           sync.Mutex
	handlers     []*inlineRegistration
	transform    toolscache.TransformFunc
	onWatchError toolscache.WatchErrorHandlerWithContext
	reflector    *toolscache.Reflector
	started      bool
	stopped      bool
	// synced is closed once the first list is in the store and its handlers were called.
	synced chan struct{}
}

var (
	_ toolscache.SharedIndexInformer = &inlineInformer{}
	_ toolscache.Controller          = &inlineInformer{}
	_ toolscache.ReflectorStore      = inlineStore{}
)

func newInlineInformer(lw toolscache.ListerWatcher, objType runtime.Object, indexers toolscache.Indexers) *inlineInformer {
	return &inlineInformer{
		lw:      lw,
		objType: objType,
		indexer: toolscache.NewIndexer(toolscache.DeletionHandlingMetaNamespaceKeyFunc, indexers),
		synced:  make(chan struct{}),
	}
}

// inlineRegistration is one handler, and whether the objects of the first list reached it.
type inlineRegistration struct {
	h      toolscache.ResourceEventHandler
	synced chan struct{}
}

func (r *inlineRegistration) HasSynced() bool { return isClosed(r.synced) }

func (r *inlineRegistration) HasSyncedChecker() toolscache.DoneChecker {
	return doneChecker{name: "event handler", done: r.synced}
}

// doneChecker is a closed-when-done channel under a name, as toolscache.WaitFor takes it.
type doneChecker struct {
	name string
	done chan struct{}
}

func (d doneChecker) Name() string          { return d.name }
func (d doneChecker) Done() <-chan struct{} { return d.done }

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (i *inlineInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod adds h; this informer does no resyncs, which the
// SharedInformer contract allows.
func (i *inlineInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, _ time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{})
}

// AddEventHandlerWithOptions adds h: if the informer has listed already, h is given every object
// of the store as an object of the initial list before this returns, and is synced.
func (i *inlineInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, _ toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.stopped {
		return nil, fmt.Errorf("handler %v was not added to the informer of %T: it has stopped", h, i.objType)
	}
	reg := &inlineRegistration{h: h, synced: make(chan struct{})}
	if isClosed(i.synced) {
		for _, obj := range i.indexer.List() {
			h.OnAdd(obj, true)
		}
		close(reg.synced)
	}
	i.handlers = append(i.handlers, reg)
	return reg, nil
}

func (i *inlineInformer) RemoveEventHandler(handle toolscache.ResourceEventHandlerRegistration) error {
	reg, ok := handle.(*inlineRegistration)
	if !ok {
		return fmt.Errorf("%T is not a registration of this informer", handle)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.handlers = slices.DeleteFunc(i.handlers, func(r *inlineRegistration) bool { return r == reg })
	return nil
}

func (i *inlineInformer) GetStore() toolscache.Store           { return i.indexer }
func (i *inlineInformer) GetIndexer() toolscache.Indexer       { return i.indexer }
func (i *inlineInformer) GetController() toolscache.Controller { return i }

func (i *inlineInformer) AddIndexers(indexers toolscache.Indexers) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.stopped {
		return errors.New("indexers were not added: the informer has stopped")
	}
	return i.indexer.AddIndexers(indexers)
}

// configure calls set, which sets what the informer reads when it starts, unless it has.
func (i *inlineInformer) configure(what string, set func()) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.started {
		return fmt.Errorf("the %s of an informer that has started cannot be changed", what)
	}
	set()
	return nil
}

func (i *inlineInformer) SetTransform(f toolscache.TransformFunc) error {
	return i.configure("transform", func() { i.transform = f })
}

func (i *inlineInformer) SetWatchErrorHandler(h toolscache.WatchErrorHandler) error {
	return i.SetWatchErrorHandlerWithContext(func(_ context.Context, r *toolscache.Reflector, err error) { h(r, err) })
}

func (i *inlineInformer) SetWatchErrorHandlerWithContext(h toolscache.WatchErrorHandlerWithContext) error {
	return i.configure("watch error handler", func() { i.onWatchError = h })
}

func (i *inlineInformer) HasSynced() bool { return isClosed(i.synced) }

func (i *inlineInformer) HasSyncedChecker() toolscache.DoneChecker {
	return doneChecker{name: fmt.Sprintf("informer of %T", i.objType), done: i.synced}
}

func (i *inlineInformer) LastSyncResourceVersion() string {
	i.mu.Lock()
	r := i.reflector
	i.mu.Unlock()
	if r == nil {
		return ""
	}
	return r.LastSyncResourceVersion()
}

func (i *inlineInformer) IsStopped() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.stopped
}

func (i *inlineInformer) Run(stopCh <-chan struct{}) {
	i.RunWithContext(wait.ContextForChannel(stopCh))
}

// The Reflector's own retry loop, which calls no handler of ours on a watch error: its
// defaults, restated (client-go keeps them unexported).
const (
	reflectorBackoffInit   = 800 * time.Millisecond
	reflectorBackoffMax    = 30 * time.Second
	reflectorBackoffReset  = 2 * time.Minute
	reflectorBackoffFactor = 2.0
	reflectorBackoffJitter = 1.0
)

// RunWithContext lists and watches until ctx ends, as client-go's Reflector does, backing off
// after an error (reported to the watch error handler, client-go's default if none was set).
func (i *inlineInformer) RunWithContext(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	i.mu.Lock()
	if i.started {
		i.mu.Unlock()
		logger.Info("Warning: the informer has started already; it runs only once", "type", fmt.Sprintf("%T", i.objType))
		return
	}
	i.started = true
	r := toolscache.NewReflectorWithOptions(i.lw, i.objType, inlineStore{i}, toolscache.ReflectorOptions{
		Logger: &logger, TypeDescription: fmt.Sprintf("%T", i.objType)})
	i.reflector = r
	onError := i.onWatchError
	i.mu.Unlock()
	defer func() {
		i.mu.Lock()
		defer i.mu.Unlock()
		i.stopped = true
	}()
	if onError == nil {
		onError = toolscache.DefaultWatchErrorHandler
	}
	backoff := wait.Backoff{Duration: reflectorBackoffInit, Cap: reflectorBackoffMax, Factor: reflectorBackoffFactor,
		Jitter: reflectorBackoffJitter, Steps: int(math.Ceil(float64(reflectorBackoffMax) / float64(reflectorBackoffInit)))}
	_ = backoff.DelayWithReset(clock.RealClock{}, reflectorBackoffReset).Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		if err := r.ListAndWatchWithContext(ctx); err != nil {
			onError(ctx, r, err)
		}
		return false, nil
	})
}

// inlineStore is what the informer's Reflector writes into.
type inlineStore struct{ i *inlineInformer }

// transformed is obj after the informer's transform.
func (s inlineStore) transformed(obj any) (any, error) {
	if s.i.transform == nil {
		return obj, nil
	}
	return s.i.transform(obj)
}

func (s inlineStore) Add(obj any) error { return s.Update(obj) }

// Update stores obj and calls the handlers with it: an update of the object it replaces, or an
// addition.
func (s inlineStore) Update(obj any) error {
	obj, err := s.transformed(obj)
	if err != nil {
		return err
	}
	i := s.i
	i.mu.Lock()
	defer i.mu.Unlock()
	old, exists, err := i.indexer.Get(obj)
	if err != nil {
		return err
	}
	if err := i.indexer.Update(obj); err != nil {
		return err
	}
	i.stored(old, exists, obj, false)
	return nil
}

// stored calls the handlers with obj, now in the store: an update of old if the store had it, or
// an addition. Called with mu held.
func (i *inlineInformer) stored(old any, existed bool, obj any, initial bool) {
	for _, r := range i.handlers {
		if existed {
			r.h.OnUpdate(old, obj)
		} else {
			r.h.OnAdd(obj, initial)
		}
	}
}

func (s inlineStore) Delete(obj any) error {
	if _, unknown := obj.(toolscache.DeletedFinalStateUnknown); !unknown {
		var err error
		if obj, err = s.transformed(obj); err != nil {
			return err
		}
	}
	i := s.i
	i.mu.Lock()
	defer i.mu.Unlock()
	if err := i.indexer.Delete(obj); err != nil {
		return err
	}
	for _, r := range i.handlers {
		r.h.OnDelete(obj)
	}
	return nil
}

// Replace makes list the store's content, after a list or a relist: an object no longer listed is
// deleted, with its last state known (DeletedFinalStateUnknown, as the deletion itself was not
// seen); one listed is an update of the object it replaces, or an addition, of the initial list
// until the first list is through.
func (s inlineStore) Replace(list []any, resourceVersion string) error {
	for n, obj := range list {
		var err error
		if list[n], err = s.transformed(obj); err != nil {
			return err
		}
	}
	i := s.i
	i.mu.Lock()
	defer i.mu.Unlock()
	stored := i.indexer.List()
	before := make(map[string]any, len(stored))
	for _, obj := range stored {
		key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			return err
		}
		before[key] = obj
	}
	if err := i.indexer.Replace(list, resourceVersion); err != nil {
		return err
	}
	initial := !isClosed(i.synced)
	for _, obj := range list {
		key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			return err
		}
		old, exists := before[key]
		delete(before, key)
		i.stored(old, exists, obj, initial)
	}
	for key, old := range before {
		for _, r := range i.handlers {
			r.h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: key, Obj: old})
		}
	}
	if initial {
		close(i.synced)
		for _, r := range i.handlers {
			close(r.synced)
		}
	}
	return nil
}

// Resync is never called: the Reflector is made without a resync period.
func (s inlineStore) Resync() error { return nil }
