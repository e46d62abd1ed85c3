package managed

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/controller/rollout"
)

// Pods lists the pods ss manages through reader, by its selectors: its namespace, or the namespaces
// its namespaceSelector selects, or every namespace.
func Pods(ctx context.Context, reader client.Reader, ss *v1beta1.SidecarSet) ([]*corev1.Pod, error) {
	scope, err := rollout.ScopeOf(ss)
	if err != nil {
		return nil, err
	}
	namespaces := []corev1.Namespace{{}} // "" lists every namespace
	namespaces[0].Name = scope.Namespace
	if scope.Namespace == "" && scope.Namespaces != nil {
		var list corev1.NamespaceList
		if err := reader.List(ctx, &list, client.MatchingLabelsSelector{Selector: scope.Namespaces}); err != nil {
			return nil, fmt.Errorf("listing namespaces: %w", err)
		}
		namespaces = list.Items
	}
	var pods []*corev1.Pod
	for _, n := range namespaces {
		ns := n.Name
		var list corev1.PodList
		// The pods are only read (rollout.Upgrade copies before changing one); with the cache as
		// reader, not copying 1,000 pods each round is most of a round's cost.
		if err := reader.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: scope.Pods}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing pods in %q: %w", ns, err)
		}
		for i := range list.Items {
			if p := &list.Items[i]; scope.Manages(ss, p, n.Labels) {
				pods = append(pods, p)
			}
		}
	}
	return pods, nil
}

// Filter returns the test of whether ss manages a pod, reading a namespace's labels through reader
// once, when ss selects namespaces by label.
func Filter(ctx context.Context, reader client.Reader, ss *v1beta1.SidecarSet) (func(*corev1.Pod) (bool, error), error) {
	scope, err := rollout.ScopeOf(ss)
	if err != nil {
		return nil, err
	}
	nsLabels := map[string]map[string]string{}
	return func(p *corev1.Pod) (bool, error) {
		l, seen := nsLabels[p.Namespace]
		if !seen && scope.Namespaces != nil {
			var ns corev1.Namespace
			if err := reader.Get(ctx, client.ObjectKey{Name: p.Namespace}, &ns); client.IgnoreNotFound(err) != nil {
				return false, fmt.Errorf("reading namespace %s: %w", p.Namespace, err)
			}
			l = ns.Labels
			nsLabels[p.Namespace] = l
		}
		return scope.Manages(ss, p, l), nil
	}, nil
}
