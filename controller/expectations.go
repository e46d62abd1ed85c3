package controller

import (
	"maps"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// expectations remember, per SidecarSet, the pods this controller wrote and the resourceVersion
// each write returned (compat §3.11). Until the informer cache shows every such pod at that version or
// later, a round must not plan: it would see the pod as not yet upgraded and upgrade it again, or
// count a budget slot as free. OpenKruise keeps two kinds (by hash for upgrades, by resourceVersion
// for hot-upgrade resets); a resourceVersion covers both, since the hash is part of the write.
type expectations struct {
	mu   sync.Mutex
	pods map[string]map[types.NamespacedName]string // SidecarSet → pod → resourceVersion written
}

func newExpectations() *expectations {
	return &expectations{pods: map[string]map[types.NamespacedName]string{}}
}

// expect records a write of pod for SidecarSet ss that returned resourceVersion rv.
func (e *expectations) expect(ss string, pod types.NamespacedName, rv string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.pods[ss]
	if m == nil {
		m = map[types.NamespacedName]string{}
		e.pods[ss] = m
	}
	if old, ok := m[pod]; !ok || newer(rv, old) {
		m[pod] = rv
	}
}

// observe clears what the cached pods satisfy, and forgets pods that are no longer among them
// (deleted or no longer matched: nothing about them can be double-counted any more). It reports
// the pods still awaited.
func (e *expectations) observe(ss string, cached []*corev1.Pod) []types.NamespacedName {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.pods[ss]
	if len(m) == 0 {
		return nil
	}
	seen := make(map[types.NamespacedName]string, len(cached))
	for _, p := range cached {
		seen[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p.ResourceVersion
	}
	var waiting []types.NamespacedName
	for key, rv := range m {
		got, ok := seen[key]
		if !ok || got == rv || newer(got, rv) {
			delete(m, key)
			continue
		}
		waiting = append(waiting, key)
	}
	if len(m) == 0 {
		delete(e.pods, ss)
	}
	return waiting
}

// expected lists the pods whose writes for ss are awaited.
func (e *expectations) expected(ss string) []types.NamespacedName {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Collect(maps.Keys(e.pods[ss]))
}

// pending reports whether writes of ss's pods are awaited in the cache.
func (e *expectations) pending(ss string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.pods[ss]) > 0
}

// forgetPod drops a deleted pod from every SidecarSet's expectations.
func (e *expectations) forgetPod(pod types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for ss, m := range e.pods {
		delete(m, pod)
		if len(m) == 0 {
			delete(e.pods, ss)
		}
	}
}

// forget drops a deleted SidecarSet's expectations.
func (e *expectations) forget(ss string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pods, ss)
}

// newer compares resourceVersions as etcd revisions, as OpenKruise does. Kubernetes calls them
// opaque, but every API server stores them as etcd's increasing integers; should one not be an
// integer, only equality (checked by the caller) can satisfy the expectation.
func newer(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x > y
}
