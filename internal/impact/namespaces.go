package impact

import (
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// Namespaces holds a cluster's namespaces from the namespace informer's events (it is a
// cache.ResourceEventHandler): the informer's own objects, shared and never modified.
type Namespaces struct {
	mu     sync.RWMutex
	byName map[string]*corev1.Namespace
}

// NewNamespaces returns an empty set of namespaces.
func NewNamespaces() *Namespaces { return &Namespaces{byName: map[string]*corev1.Namespace{}} }

var _ toolscache.ResourceEventHandler = (*Namespaces)(nil)

// OnAdd holds obj.
func (n *Namespaces) OnAdd(obj any, _ bool) { n.set(obj, true) }

// OnUpdate holds obj in old's place.
func (n *Namespaces) OnUpdate(_, obj any) { n.set(obj, true) }

// OnDelete forgets obj.
func (n *Namespaces) OnDelete(obj any) { n.set(obj, false) }

func (n *Namespaces) set(obj any, present bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if present {
		n.byName[ns.Name] = ns
	} else {
		delete(n.byName, ns.Name)
	}
}

// Labels are the labels of the namespace name; false when it is not known.
func (n *Namespaces) Labels(name string) (map[string]string, bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	ns, ok := n.byName[name]
	if !ok {
		return nil, false
	}
	return ns.Labels, true
}

// List returns the namespaces held, by name; they are shared: read only.
func (n *Namespaces) List() []*corev1.Namespace {
	n.mu.RLock()
	out := make([]*corev1.Namespace, 0, len(n.byName))
	for _, ns := range n.byName {
		out = append(out, ns)
	}
	n.mu.RUnlock()
	slices.SortFunc(out, func(a, b *corev1.Namespace) int { return strings.Compare(a.Name, b.Name) })
	return out
}
