package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/impact"
	"github.com/sidecarops/sidecarops/internal/injector"
)

// enforced is the labels of namespace ns when they enforce a Pod Security level above privileged,
// the only namespaces where injection can make a pod fail it; nil elsewhere, and where the labels
// are not known (neither the input nor, live, the cluster has the Namespace).
func (v *podWebhookView) enforced(ctx context.Context, ns string) (map[string]string, error) {
	nsLabels, err := v.labels(ctx, ns)
	if err != nil || impact.Enforced(nsLabels).Level == psaapi.LevelPrivileged {
		return nil, err
	}
	return nsLabels, nil
}

// podSecurity is what the pod webhook warns when injecting res into before, the pod as written,
// makes it fail the level the labels enforced (enforced's) of its namespace: the very finding, and
// so the message, of admission. Nil when nothing was injected or the pod fails no more than before.
func (w *workspace) podSecurity(enforced map[string]string, before *corev1.Pod, res injector.PodResult) *impact.PodFinding {
	if enforced == nil || res.Outcome != injector.Injected || res.Pod == nil {
		return nil
	}
	sets := make([]*v1beta1.SidecarSet, 0, len(res.Injected))
	for _, name := range res.Injected {
		if ss, ok := w.snapshot.SidecarSet(name); ok {
			sets = append(sets, ss)
		}
	}
	return impact.Worsened(enforced, before, res.Pod, sets)
}
