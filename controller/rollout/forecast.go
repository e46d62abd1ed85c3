package rollout

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// Step is one forecast round: the pods it upgrades, or the hot upgrades it resets.
type Step struct {
	Upgrade []*corev1.Pod
	Reset   []*corev1.Pod
}

// Forecast plays NextRound forward from pods, as the controller would, under the assumption that
// the kubelet applies every change before the next round and that pods stay ready; it returns the
// rounds that change something (at most maxRounds). The first round is what happens now; when
// upgrades in flight leave it nothing to do, it is returned empty and the forecast goes on. Pods the strategy holds back (partition,
// selector, not upgradable, paused) never appear. The input pods are not modified; the returned
// pods are the forecast states, in round order.
func Forecast(ss *v1beta1.SidecarSet, pods []*corev1.Pod, now time.Time, maxRounds int) ([]Step, error) {
	cur := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		cur[i] = p.DeepCopy()
	}
	var steps []Step
	for round := 0; len(steps) < maxRounds; round++ {
		if round > 0 {
			for _, p := range cur {
				assumeApplied(p)
			}
		}
		r := NextRound(ss, cur)
		if r.Plan.Stopped == StoppedNotUpdate || r.Plan.Stopped == StoppedPaused {
			break
		}
		act, apply := r.Plan.Upgrade, Upgrade
		var step Step
		if len(r.Reset) > 0 {
			act, apply = r.Reset, Reset
		}
		if len(act) == 0 {
			if round == 0 && anyPending(cur) {
				// Nothing now: upgrades in flight hold the budget until the kubelet applies them.
				steps = append(steps, step)
				continue
			}
			break
		}
		index := make(map[*corev1.Pod]int, len(cur))
		for i, p := range cur {
			index[p] = i
		}
		for _, p := range act {
			next, _, err := apply(p, ss, now)
			if err != nil {
				return steps, err
			}
			cur[index[p]] = next
			if len(r.Reset) > 0 {
				step.Reset = append(step.Reset, next)
			} else {
				step.Upgrade = append(step.Upgrade, next)
			}
		}
		steps = append(steps, step)
	}
	return steps, nil
}

func anyPending(pods []*corev1.Pod) bool {
	for _, p := range pods {
		if len(pending(p)) > 0 {
			return true
		}
	}
	return false
}

// assumeApplied reports every container as running its spec image, with an imageID that changes
// with the image, as the kubelet does after an in-place update.
func assumeApplied(pod *corev1.Pod) {
	for _, s := range pending(pod) {
		s.status.Image, s.status.ImageID = s.image, "forecast://"+s.image
	}
}

type pendingImage struct {
	status *corev1.ContainerStatus
	image  string // the spec's
}

// pending are the container statuses of pod whose image is not yet the spec's.
func pending(pod *corev1.Pod) []pendingImage {
	var out []pendingImage
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		for j := range pod.Status.ContainerStatuses {
			if s := &pod.Status.ContainerStatuses[j]; s.Name == c.Name && s.Image != c.Image {
				out = append(out, pendingImage{s, c.Image})
			}
		}
	}
	return out
}
