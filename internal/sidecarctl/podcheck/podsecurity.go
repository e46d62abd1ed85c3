package podcheck

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/impact"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/workspace"
)

// PodSecurity is what the pod webhook warns when injecting res into before, the pod as written,
// makes it fail the level the labels enforced (installview.View.Enforced's) of its namespace: the
// very finding, and so the message, of admission. Nil when nothing was injected or the pod fails no more than before.
func PodSecurity(w *workspace.Workspace, enforced map[string]string, before *corev1.Pod, res injector.PodResult) *impact.PodFinding {
	if enforced == nil || res.Outcome != injector.Injected || res.Pod == nil {
		return nil
	}
	sets := make([]*v1beta1.SidecarSet, 0, len(res.Injected))
	for _, name := range res.Injected {
		if ss, ok := w.Snapshot.SidecarSet(name); ok {
			sets = append(sets, ss)
		}
	}
	return impact.Worsened(enforced, before, res.Pod, sets)
}
