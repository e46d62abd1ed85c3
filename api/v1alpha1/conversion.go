package v1alpha1

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// ConvertTo converts src to the hub version, as OpenKruise does: a non-empty spec.namespace
// becomes a namespaceSelector on the namespace's name label and replaces any namespaceSelector
// (the one thing v1alpha1 → v1beta1 → v1alpha1 loses), and the custom-version label moves to
// spec.customVersion.
func (ss *SidecarSet) ConvertTo(hub conversion.Hub) error {
	src := ss
	dst, ok := hub.(*v1beta1.SidecarSet)
	if !ok {
		return fmt.Errorf("v1alpha1 SidecarSet converts to a v1beta1 SidecarSet, not %T", hub)
	}
	s := src.Spec.DeepCopy()
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Spec = v1beta1.SidecarSetSpec{
		Selector:             s.Selector,
		NamespaceSelector:    s.NamespaceSelector,
		InitContainers:       s.InitContainers,
		Containers:           s.Containers,
		Volumes:              s.Volumes,
		UpdateStrategy:       s.UpdateStrategy,
		InjectionStrategy:    s.InjectionStrategy,
		ImagePullSecrets:     s.ImagePullSecrets,
		RevisionHistoryLimit: s.RevisionHistoryLimit,
		PatchPodMetadata:     s.PatchPodMetadata,
	}
	if s.Namespace != "" {
		dst.Spec.NamespaceSelector = v1beta1.NamespaceNamed(s.Namespace)
	}
	if v, ok := dst.Labels[SidecarSetCustomVersionLabel]; ok {
		dst.Spec.CustomVersion = v
		delete(dst.Labels, SidecarSetCustomVersionLabel)
	}
	dst.Status = *src.Status.DeepCopy()
	return nil
}

// ConvertFrom converts from the hub version: namespaceSelector is kept as it is (no
// spec.namespace is recreated) and spec.customVersion becomes the custom-version label.
func (ss *SidecarSet) ConvertFrom(hub conversion.Hub) error {
	dst := ss
	src, ok := hub.(*v1beta1.SidecarSet)
	if !ok {
		return fmt.Errorf("v1alpha1 SidecarSet converts from a v1beta1 SidecarSet, not %T", hub)
	}
	s := src.Spec.DeepCopy()
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Spec = SidecarSetSpec{
		Selector:             s.Selector,
		NamespaceSelector:    s.NamespaceSelector,
		InitContainers:       s.InitContainers,
		Containers:           s.Containers,
		Volumes:              s.Volumes,
		UpdateStrategy:       s.UpdateStrategy,
		InjectionStrategy:    s.InjectionStrategy,
		ImagePullSecrets:     s.ImagePullSecrets,
		RevisionHistoryLimit: s.RevisionHistoryLimit,
		PatchPodMetadata:     s.PatchPodMetadata,
	}
	if s.CustomVersion != "" {
		if dst.Labels == nil {
			dst.Labels = map[string]string{}
		}
		dst.Labels[SidecarSetCustomVersionLabel] = s.CustomVersion
	}
	dst.Status = *src.Status.DeepCopy()
	return nil
}
