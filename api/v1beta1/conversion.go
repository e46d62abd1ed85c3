package v1beta1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Hub marks v1beta1 as the version every other converts to and from (controller-runtime's
// conversion.Hub), as in OpenKruise.
func (*SidecarSet) Hub() {}

// NamespaceNamed is the namespaceSelector a v1alpha1 spec.namespace converts into: the namespace's
// name label, which every Namespace carries.
func NamespaceNamed(namespace string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{NamespaceNameLabel: namespace}}
}
