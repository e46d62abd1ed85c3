package impact

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// View is a SidecarSet's impact view, input.impact of the SidecarSet policies.
type View struct {
	// AllNamespaces: the SidecarSet has no namespace scope, so it selects every namespace, those
	// created later included.
	AllNamespaces bool `json:"allNamespaces"`
	// Namespaces are the existing namespaces its scope selects, by name.
	Namespaces map[string]Namespace `json:"namespaces"`
	// Pods is the sum of the namespaces' Pods.
	Pods int `json:"pods"`
}

// Namespace is one selected namespace.
type Namespace struct {
	Labels map[string]string `json:"labels"`
	// Pods counts its existing pods, not yet finished, that the SidecarSet's selector selects.
	Pods int `json:"pods"`
	// PodSecurity is its Pod Security enforcement, and what the sidecars fail of it.
	PodSecurity PodSecurity `json:"podSecurity"`
}

// Pods counts existing pods: those of namespace that selector selects and that have not finished.
// The manager's Census and sidecarctl's input files implement it.
type Pods interface {
	Count(namespace string, selector labels.Selector) int
}

// Of computes ss's impact view over namespaces (every namespace known) and pods. ss is the
// SidecarSet as stored (v1beta1, whose namespace scope is its namespaceSelector). An invalid
// selector is OpenKruise's validation to refuse; it is an error here.
func Of(ss *v1beta1.SidecarSet, namespaces []*corev1.Namespace, pods Pods) (*View, error) {
	scope := labels.Everything()
	if ss.Spec.NamespaceSelector != nil {
		var err error
		if scope, err = metav1.LabelSelectorAsSelector(ss.Spec.NamespaceSelector); err != nil {
			return nil, fmt.Errorf("SidecarSet/%s: spec.namespaceSelector: %w", ss.Name, err)
		}
	}
	// An empty selector injects into no pod (policies/match.rego's applies).
	podSel := labels.Nothing()
	if sel := ss.Spec.Selector; sel != nil && (len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0) {
		var err error
		if podSel, err = metav1.LabelSelectorAsSelector(ss.Spec.Selector); err != nil {
			return nil, fmt.Errorf("SidecarSet/%s: spec.selector: %w", ss.Name, err)
		}
	}
	sidecars := newSidecarPod(ss)
	v := &View{AllNamespaces: ss.Spec.NamespaceSelector == nil, Namespaces: make(map[string]Namespace)}
	for _, ns := range namespaces {
		lbls := namespaceLabels(ns)
		if !scope.Matches(labels.Set(lbls)) {
			continue
		}
		n := Namespace{Labels: lbls, Pods: pods.Count(ns.Name, podSel), PodSecurity: sidecars.podSecurity(lbls)}
		v.Namespaces[ns.Name] = n
		v.Pods += n.Pods
	}
	return v, nil
}

// namespaceLabels are ns's labels with the name label every real Namespace carries, which offline
// input may leave out.
func namespaceLabels(ns *corev1.Namespace) map[string]string {
	out := make(map[string]string, len(ns.Labels)+1)
	maps.Copy(out, ns.Labels)
	out[v1beta1.NamespaceNameLabel] = ns.Name
	return out
}

// Over computes impact views over a set of namespaces and a count of pods: the manager's informers
// (Namespaces and Census), or fixed ones (NamespaceList and Static). It is the SidecarSet
// webhook's Impacts.
type Over struct {
	Namespaces interface{ List() []*corev1.Namespace }
	Pods       Pods
}

// Impact is ss's impact view.
func (o Over) Impact(_ context.Context, ss *v1beta1.SidecarSet) (*View, error) {
	return Of(ss, o.Namespaces.List(), o.Pods)
}

// NamespaceList is a fixed set of namespaces.
type NamespaceList []*corev1.Namespace

// List returns the namespaces.
func (l NamespaceList) List() []*corev1.Namespace { return l }
