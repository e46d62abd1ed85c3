package rollout

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// Scope is where a SidecarSet's controller looks for its pods (compat §3.3): pods matching Pods in
// Namespace, or else in the namespaces Namespaces selects, or else everywhere. The pods it
// manages are those in scope that also pass IsManaged.
type Scope struct {
	Pods labels.Selector
	// Namespace, when not empty, is the only namespace: the namespaceSelector is one on the
	// namespace's name label alone (what a v1alpha1 spec.namespace converts into), so pods are
	// listed in that namespace only.
	Namespace string
	// Namespaces selects namespaces by their labels (spec.namespaceSelector); nil means all.
	Namespaces labels.Selector
}

// ScopeOf reads ss's selectors. An unparsable selector is an error: OpenKruise lists no pods then.
func ScopeOf(ss *v1beta1.SidecarSet) (Scope, error) {
	var s Scope
	var err error
	if s.Pods, err = metav1.LabelSelectorAsSelector(ss.Spec.Selector); err != nil {
		return Scope{}, fmt.Errorf("spec.selector: %w", err)
	}
	if ns := ss.Spec.NamespaceSelector; ns != nil && len(ns.MatchLabels) == 1 && len(ns.MatchExpressions) == 0 && ns.MatchLabels[v1beta1.NamespaceNameLabel] != "" {
		s.Namespace = ns.MatchLabels[v1beta1.NamespaceNameLabel]
		return s, nil
	}
	if ss.Spec.NamespaceSelector != nil {
		if s.Namespaces, err = metav1.LabelSelectorAsSelector(ss.Spec.NamespaceSelector); err != nil {
			return Scope{}, fmt.Errorf("spec.namespaceSelector: %w", err)
		}
	}
	return s, nil
}

// Contains reports whether pod is in scope; nsLabels are the labels of the pod's namespace.
func (s Scope) Contains(pod *corev1.Pod, nsLabels map[string]string) bool {
	if s.Namespace != "" && pod.Namespace != s.Namespace {
		return false
	}
	if s.Namespaces != nil && !s.Namespaces.Matches(labels.Set(nsLabels)) {
		return false
	}
	return s.Pods.Matches(labels.Set(pod.Labels))
}

// Manages reports whether ss, whose scope s is, manages pod: in scope and passing IsManaged. This is
// the one test of it; nsLabels are the labels of the pod's namespace.
func (s Scope) Manages(ss *v1beta1.SidecarSet, pod *corev1.Pod, nsLabels map[string]string) bool {
	return s.Contains(pod, nsLabels) && IsManaged(pod, ss)
}
