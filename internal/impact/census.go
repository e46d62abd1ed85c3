package impact

import (
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
)

// Census counts a cluster's pods by namespace and label set, from the pod informer's events
// (it is a cache.ResourceEventHandler). A count is then a selector test per distinct label set of
// a namespace, of which a cluster has far fewer than pods: the replicas of a workload share
// theirs. It keeps no pod. Finished pods (Succeeded, Failed) are not counted.
type Census struct {
	mu         sync.RWMutex
	namespaces map[string]map[string]*labelSet
}

type labelSet struct {
	labels labels.Set
	pods   int
}

// NewCensus returns an empty census.
func NewCensus() *Census { return &Census{namespaces: map[string]map[string]*labelSet{}} }

var _ toolscache.ResourceEventHandler = (*Census)(nil)

// OnAdd counts obj.
func (c *Census) OnAdd(obj any, _ bool) { c.add(podOf(obj), 1) }

// OnUpdate moves the pod from old's label set to obj's.
func (c *Census) OnUpdate(old, obj any) {
	c.add(podOf(old), -1)
	c.add(podOf(obj), 1)
}

// OnDelete stops counting obj.
func (c *Census) OnDelete(obj any) { c.add(podOf(obj), -1) }

func podOf(obj any) *corev1.Pod {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, _ := obj.(*corev1.Pod)
	return p
}

func (c *Census) add(p *corev1.Pod, n int) {
	if p == nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return
	}
	key := setKey(p.Labels)
	c.mu.Lock()
	defer c.mu.Unlock()
	sets := c.namespaces[p.Namespace]
	if sets == nil {
		sets = map[string]*labelSet{}
		c.namespaces[p.Namespace] = sets
	}
	s := sets[key]
	if s == nil {
		s = &labelSet{labels: labels.Set(p.Labels)}
		sets[key] = s
	}
	if s.pods += n; s.pods <= 0 {
		delete(sets, key)
		if len(sets) == 0 {
			delete(c.namespaces, p.Namespace)
		}
	}
}

// setKey identifies a label set: its pairs in key order. A NUL byte appears in no label.
func setKey(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	return b.String()
}

// Count implements Pods.
func (c *Census) Count(namespace string, selector labels.Selector) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := 0
	for _, s := range c.namespaces[namespace] {
		if selector.Matches(s.labels) {
			n += s.pods
		}
	}
	return n
}

// Static counts pods given as a list, each standing for a number of replicas: sidecarctl's
// workloads as the input files describe them.
type Static []Replicas

// Replicas are the pods a workload runs.
type Replicas struct {
	Namespace string
	Labels    map[string]string
	Count     int
}

// Count implements Pods.
func (s Static) Count(namespace string, selector labels.Selector) int {
	n := 0
	for _, r := range s {
		if r.Namespace == namespace && selector.Matches(labels.Set(r.Labels)) {
			n += r.Count
		}
	}
	return n
}
