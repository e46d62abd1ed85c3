package revisions

import (
	"errors"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
)

// Source gives read access to ControllerRevisions (kruise namespace).
type Source interface {
	ByName(name string) (*appsv1.ControllerRevision, bool)
	ForSidecarSet(sidecarSetName string) []*appsv1.ControllerRevision // any order
}

// NewStaticSource returns a Source over a fixed set of revisions.
func NewStaticSource(crs ...*appsv1.ControllerRevision) Source {
	return staticSource{}
}

type staticSource struct{}

func (staticSource) ByName(string) (*appsv1.ControllerRevision, bool)  { return nil, false }
func (staticSource) ForSidecarSet(string) []*appsv1.ControllerRevision { return nil }

var errNotImplemented = errors.New("revisions: not implemented yet")

// Raw returns a revision's data.raw for ss (ref §1.10).
func Raw(ss *v1alpha1.SidecarSet) ([]byte, error) { return nil, errNotImplemented }

// Name returns the ControllerRevision name for ss with data raw and collisionCount.
func Name(ss *v1alpha1.SidecarSet, raw []byte, collisionCount int32) string { return "" }

// Find returns the revision ss's injectionStrategy.revision names, nil when none is configured.
func Find(ss *v1alpha1.SidecarSet, src Source) (*appsv1.ControllerRevision, error) {
	return nil, errNotImplemented
}

// Restore returns ss as it was at revision cr.
func Restore(ss *v1alpha1.SidecarSet, cr *appsv1.ControllerRevision) (*v1alpha1.SidecarSet, error) {
	return nil, errNotImplemented
}

// ForInjection returns the SidecarSet to inject into pod (ref §1.5): ss or a restored historical
// copy. rand returns [0,1).
func ForInjection(ss *v1alpha1.SidecarSet, pod *corev1.Pod, src Source, rand func() float64) (*v1alpha1.SidecarSet, error) {
	return nil, errNotImplemented
}
