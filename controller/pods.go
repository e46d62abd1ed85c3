package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/controller/rollout"
)

// errSettled ends a conflict retry when the fresh pod no longer needs the write.
var errSettled = errors.New("settled")

// writePod builds the pod's next state with change and writes what change changed, as a strategic
// merge patch conditional on the pod's resourceVersion, retrying on conflicts with a fresh copy from
// the API server as long as still(fresh) says the write is still wanted. It returns the written
// pod, or nil when a fresh copy made the write unnecessary. A patch, not an update: the cached pod
// holds only what the controller reads (compactPod), and the rest must not be written back.
func (r *Reconciler) writePod(ctx context.Context, pod *corev1.Pod, change func(*corev1.Pod) (*corev1.Pod, error), still func(*corev1.Pod) bool) (*corev1.Pod, error) {
	key := client.ObjectKeyFromObject(pod)
	var written *corev1.Pod
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		next, err := change(pod)
		if err != nil {
			return err
		}
		err = r.Client.Patch(ctx, next, client.StrategicMergeFrom(pod, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			written = next
			return nil
		}
		if apierrors.IsConflict(err) {
			fresh := &corev1.Pod{}
			if gerr := r.APIReader.Get(ctx, key, fresh); gerr != nil {
				return gerr
			}
			if !still(fresh) {
				return errSettled
			}
			pod = fresh
		}
		return err
	})
	if errors.Is(err, errSettled) || apierrors.IsNotFound(err) {
		return nil, nil
	}
	return written, err
}

// upgrade upgrades one pod's sidecars in place to ss (compat §3.6) and returns the pod written (nil
// when a fresh copy showed nothing to do). The caller sets the SidecarSetUpgradable condition.
func (r *Reconciler) upgrade(ctx context.Context, ss *v1beta1.SidecarSet, pod *corev1.Pod) (*corev1.Pod, error) {
	written, err := r.writePod(ctx, pod,
		func(p *corev1.Pod) (*corev1.Pod, error) {
			next, _, err := rollout.Upgrade(p, ss, r.now())
			return next, err
		},
		func(fresh *corev1.Pod) bool { return rollout.StillUpgradable(fresh, ss) })
	if err != nil || written == nil {
		return nil, err
	}
	r.exp.expect(ss.Name, client.ObjectKeyFromObject(written), written.ResourceVersion)
	return written, nil
}

// The reasons of the Events reset records on the pod, OpenKruise's (compat §3.9).
const (
	ReasonResetContainerFailed  = "ResetContainerFailed"
	ReasonResetContainerSucceed = "ResetContainerSucceed"
)

// reset puts a hot-upgraded pod's old twin back on the empty image (compat §3.9 step 3), with the
// pod events OpenKruise emits.
func (r *Reconciler) reset(ctx context.Context, ss *v1beta1.SidecarSet, pod *corev1.Pod) error {
	written, err := r.writePod(ctx, pod,
		func(p *corev1.Pod) (*corev1.Pod, error) {
			next, _, err := rollout.Reset(p, ss, r.now())
			return next, err
		},
		func(fresh *corev1.Pod) bool { return rollout.ReadyToReset(fresh, ss) })
	if err != nil {
		if r.Recorder != nil {
			r.Recorder.Eventf(pod, ss, corev1.EventTypeWarning, ReasonResetContainerFailed, "Reset", "reset sidecar container image empty failed: %s", err.Error())
		}
		return err
	}
	if written == nil {
		return nil
	}
	r.exp.expect(ss.Name, client.ObjectKeyFromObject(written), written.ResourceVersion)
	if r.Recorder != nil {
		r.Recorder.Eventf(written, ss, corev1.EventTypeNormal, ReasonResetContainerSucceed, "Reset", "reset sidecar container image empty successfully")
	}
	return nil
}

// setUpgradable sets ss's entry of the pod's SidecarSetUpgradable condition (compat §3.8) when it
// changes. The condition's message holds every SidecarSet's entry, so two SidecarSets reconciled at
// once must not drop each other's: the JSON patch first tests that status.conditions is still the
// list the new condition was computed from. That guards exactly what matters, where a
// resourceVersion precondition would also fail on every kubelet status report (an upgraded pod
// gets one at once). It returns the patched pod, or nil when nothing was written.
func (r *Reconciler) setUpgradable(ctx context.Context, ss *v1beta1.SidecarSet, pod *corev1.Pod, upgradable bool) (*corev1.Pod, error) {
	key := client.ObjectKeyFromObject(pod)
	var patched *corev1.Pod
	stale := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsInvalid(err) }
	err := retry.OnError(retry.DefaultBackoff, stale, func() error {
		cond, changed, err := rollout.UpgradableCondition(pod, ss.Name, upgradable, r.now())
		if err != nil || !changed {
			return err
		}
		patch, err := conditionPatch(pod.Status.Conditions, cond)
		if err != nil {
			return err
		}
		target := pod.DeepCopy()
		err = r.Client.Status().Patch(ctx, target, client.RawPatch(types.JSONPatchType, patch))
		if err == nil {
			patched = target
			return nil
		}
		if stale(err) {
			fresh := &corev1.Pod{}
			if gerr := r.APIReader.Get(ctx, key, fresh); gerr != nil {
				return gerr
			}
			pod = fresh
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("condition %s: %w", rollout.UpgradableConditionType, err)
	}
	if patched != nil {
		r.exp.expect(ss.Name, key, patched.ResourceVersion)
	}
	return patched, nil
}

// conditionPatch is an RFC 6902 patch that sets cond in a pod whose status.conditions are seen:
// it tests that they still are, then replaces the condition of cond's type or appends it.
func conditionPatch(seen []corev1.PodCondition, cond corev1.PodCondition) ([]byte, error) {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	if len(seen) == 0 {
		// Testing null passes on an absent list (as the API server's JSON patch applies it) and
		// fails if a list appeared meanwhile, which "add" alone would overwrite.
		return json.Marshal([]op{{"test", "/status/conditions", nil}, {"add", "/status/conditions", []corev1.PodCondition{cond}}})
	}
	ops := []op{{"test", "/status/conditions", seen}}
	for i := range seen {
		if seen[i].Type == cond.Type {
			return json.Marshal(append(ops, op{"replace", fmt.Sprintf("/status/conditions/%d", i), cond}))
		}
	}
	return json.Marshal(append(ops, op{"add", "/status/conditions/-", cond}))
}
