package webhook

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	psaapi "k8s.io/pod-security-admission/api"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/impact"
	"github.com/sidecarops/sidecarops/internal/injector"
)

// PodSecurity makes visible why Pod Security refuses a pod our injection made fail its namespace's
// enforced level: Pod Security runs after the mutating webhooks and names only the container.
type PodSecurity struct {
	// Namespaces gives a namespace's labels (false: not known, nothing is checked).
	Namespaces interface {
		Labels(namespace string) (map[string]string, bool)
	}
	// Recorder, when not nil, records a Warning Event on each SidecarSet named.
	Recorder events.EventRecorder
}

// PodSecurityViolationReason is the reason of the Event on a SidecarSet whose sidecars made a pod
// fail its namespace's enforced Pod Security level.
const PodSecurityViolationReason = "PodSecurityViolation"

// enforced is the labels of namespace when they enforce a level above privileged: only there can
// injection turn an admitted pod into a refused one, and only there is the injected pod built.
func (p *PodSecurity) enforced(namespace string) map[string]string {
	if p == nil || p.Namespaces == nil {
		return nil
	}
	labels, ok := p.Namespaces.Labels(namespace)
	if !ok || impact.Enforced(labels).Level == psaapi.LevelPrivileged {
		return nil
	}
	return labels
}

// check warns, counts and (but on a dry run) records when res made before fail the level labels
// enforce.
func (p *PodSecurity) check(m *Metrics, snap *engine.Snapshot, labels map[string]string, before *corev1.Pod, res injector.PodResult, resp *reviewResponse, dryRun bool) {
	if labels == nil || res.Outcome != injector.Injected || res.Pod == nil {
		return
	}
	sets := make([]*v1beta1.SidecarSet, 0, len(res.Injected))
	for _, name := range res.Injected {
		if ss, ok := snap.SidecarSet(name); ok {
			sets = append(sets, ss)
		}
	}
	f := impact.Worsened(labels, before, res.Pod, sets)
	if f == nil {
		return
	}
	msg := f.String()
	resp.warnings = append(resp.warnings, msg)
	m.countPodSecurityViolation()
	if p.Recorder == nil || dryRun {
		return
	}
	for _, name := range f.SidecarSets {
		if ss, ok := snap.SidecarSet(name); ok {
			p.Recorder.Eventf(ss, nil, corev1.EventTypeWarning, PodSecurityViolationReason, "Inject",
				"%s (pod %s/%s)", msg, res.Namespace, podName(before))
		}
	}
}
