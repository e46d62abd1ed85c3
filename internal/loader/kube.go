package loader

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// EventSource is the reporting controller of the loader's Events.
const EventSource = "sidecarops-policy-loader"

// ReadyzCheckName is the name of the readiness check SetupWithManager adds.
const ReadyzCheckName = "policy-snapshot"

// ManagerOptions tell SetupWithManager where the manager runs.
type ManagerOptions struct {
	// Namespace is the manager's namespace: the kruise-configuration ConfigMap lives there unless
	// ConfigurationNamespace says otherwise, and the SidecarSets' ControllerRevisions unless
	// RevisionNamespace does (OpenKruise keeps both in its own namespace). Required.
	Namespace string
	// ConfigurationNamespace holds the kruise-configuration ConfigMap (default Namespace):
	// kruise-system reads the whitelist an OpenKruise being taken over left there.
	ConfigurationNamespace string
	// RevisionNamespace holds the SidecarSets' ControllerRevisions (default Namespace):
	// kruise-system keeps the history of an OpenKruise being taken over.
	RevisionNamespace string
	// PodName and PodUID (downward API: metadata.name, metadata.uid) name this replica's Pod. Events
	// are recorded on it because each replica activates bundles on its own; `kubectl describe pod`
	// matches them by UID.
	PodName string
	PodUID  types.UID
	// Lease names the manager's leader-election Lease. Without PodName, Events are recorded on it:
	// an object of the manager's namespace, so they are listed there (on a cluster-scoped object,
	// the Namespace, they would land in "default"). It need not exist.
	Lease string
}

// SetupWithManager adds st (the compile loop), an informer feed into st and a readiness check named
// ReadyzCheckName to mgr, and, unless st's Options set them, records Events through
// mgr.GetEventRecorder(EventSource) on this replica's Pod (or the Namespace). None of them needs
// leader election. Bundle sources are added by the caller (mgr.Add(source)).
//
// The feed reads only from the manager's cache: informers for SidecarSets, Namespaces,
// ControllerRevisions and ConfigMaps, with event handlers. Merge CacheByObject into the manager's
// cache options so that only the namespace's SidecarSet revisions and the one ConfigMap are cached.
func SetupWithManager(mgr manager.Manager, st *Loader, opts ManagerOptions) error {
	if opts.Namespace == "" {
		return errors.New("loader: ManagerOptions.Namespace is required")
	}
	if _, _, err := mgr.GetScheme().ObjectKinds(&v1beta1.SidecarSet{}); err != nil {
		return fmt.Errorf("loader: the manager's scheme lacks SidecarSet (add api/v1beta1.AddToScheme): %w", err)
	}
	var obj client.Object
	switch {
	case opts.PodName != "":
		obj = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: opts.PodName, Namespace: opts.Namespace, UID: opts.PodUID}}
	case opts.Lease != "":
		obj = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: opts.Lease, Namespace: opts.Namespace}}
	default:
		return errors.New("loader: ManagerOptions needs PodName or Lease: Events must name an object of the manager's namespace")
	}
	st.setEvents(mgr.GetEventRecorder(EventSource), obj)
	if err := mgr.Add(st); err != nil {
		return err
	}
	revisions := cmp.Or(opts.RevisionNamespace, opts.Namespace)
	configuration := cmp.Or(opts.ConfigurationNamespace, opts.Namespace)
	if err := mgr.Add(&feed{st: st, cache: mgr.GetCache(), handlers: newHandlers(st, configuration, revisions)}); err != nil {
		return err
	}
	return mgr.AddReadyzCheck(ReadyzCheckName, st.Check)
}

// CacheByObject restricts the manager's cache to what the loader reads of ControllerRevisions (in
// revisionNamespace) and ConfigMaps (in configurationNamespace): without it the informers would list and watch
// every one in the cluster (DaemonSet and StatefulSet revisions, every ConfigMap) and need
// cluster-wide RBAC for them.
func CacheByObject(configurationNamespace, revisionNamespace string) map[client.Object]cache.ByObject {
	hasOwner, _ := labels.NewRequirement(v1beta1.SidecarSetNameLabel, selection.Exists, nil)
	return map[client.Object]cache.ByObject{
		&appsv1.ControllerRevision{}: {
			Namespaces: map[string]cache.Config{revisionNamespace: {}},
			Label:      labels.NewSelector().Add(*hasOwner),
		},
		&corev1.ConfigMap{}: {
			Namespaces: map[string]cache.Config{configurationNamespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", v1beta1.KruiseConfigurationName),
		},
	}
}

// feed registers the handlers on the cache's informers and tells the Loader when they have
// delivered every existing object.
type feed struct {
	st       *Loader
	cache    cache.Informers
	handlers []kindHandler
}

type kindHandler struct {
	obj     client.Object
	handler toolscache.ResourceEventHandler
}

func (f *feed) NeedLeaderElection() bool { return false }

func (f *feed) Start(ctx context.Context) error {
	var synced []toolscache.InformerSynced
	for _, h := range f.handlers {
		inf, err := f.cache.GetInformer(ctx, h.obj)
		if err != nil {
			return fmt.Errorf("loader: informer for %T: %w", h.obj, err)
		}
		reg, err := inf.AddEventHandler(h.handler)
		if err != nil {
			return fmt.Errorf("loader: event handler for %T: %w", h.obj, err)
		}
		defer func() { _ = inf.RemoveEventHandler(reg) }()
		synced = append(synced, reg.HasSynced)
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil // ctx ended
	}
	f.st.SetClusterSynced()
	<-ctx.Done()
	return nil
}

// newHandlers returns the event handlers that feed st. They filter what they are given (namespace,
// label, name) even though CacheByObject restricts the cache, so that a manager without those
// restrictions still feeds only the right objects.
func newHandlers(st *Loader, namespace, revisionNamespace string) []kindHandler {
	isRevision := func(cr *appsv1.ControllerRevision) bool {
		_, ok := cr.Labels[v1beta1.SidecarSetNameLabel]
		return cr.Namespace == revisionNamespace && ok
	}
	isConfig := func(cm *corev1.ConfigMap) bool {
		return cm.Namespace == namespace && cm.Name == v1beta1.KruiseConfigurationName
	}
	return []kindHandler{
		{&v1beta1.SidecarSet{}, handlerFor(
			func(ss *v1beta1.SidecarSet) {
				if err := st.SetSidecarSet(ss); err != nil {
					st.log.Error(err, "SidecarSet ignored")
				}
			},
			func(ss *v1beta1.SidecarSet) { st.DeleteSidecarSet(ss.Name) })},
		{&corev1.Namespace{}, handlerFor(st.SetNamespace,
			func(ns *corev1.Namespace) { st.DeleteNamespace(ns.Name) })},
		{&appsv1.ControllerRevision{}, handlerFor(
			func(cr *appsv1.ControllerRevision) {
				if isRevision(cr) {
					st.SetRevision(cr)
				} else {
					st.DeleteRevision(cr.Name) // its label was removed; a no-op if it was never stored
				}
			},
			func(cr *appsv1.ControllerRevision) {
				if cr.Namespace == revisionNamespace {
					st.DeleteRevision(cr.Name)
				}
			})},
		{&corev1.ConfigMap{}, handlerFor(
			func(cm *corev1.ConfigMap) {
				if isConfig(cm) {
					st.SetConfigMap(cm)
				}
			},
			func(cm *corev1.ConfigMap) {
				if isConfig(cm) {
					st.SetConfigMap(nil)
				}
			})},
	}
}

// handlerFor adapts typed set/delete functions to an informer's event handler. Objects come from the
// cache and are shared: the Loader keeps them as they are (SetSidecarSet, SetRevision) and nobody
// may modify them.
func handlerFor[T client.Object](set, del func(T)) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o, ok := obj.(T); ok {
				set(o)
			}
		},
		UpdateFunc: func(_, obj any) {
			if o, ok := obj.(T); ok {
				set(o)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if o, ok := obj.(T); ok {
				del(o)
			}
		},
	}
}
