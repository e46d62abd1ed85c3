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

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/rollout"
)

// errSettled ends a conflict retry when the fresh pod no longer needs the write.
var errSettled = errors.New("settled")

// writePod builds the pod's next state with change and updates it, retrying on conflicts with a
// fresh copy from the API server as long as still(fresh) says the write is still wanted. It
// returns the written pod, or nil when a fresh copy made the write unnecessary.
func (r *Reconciler) writePod(ctx context.Context, pod *corev1.Pod, change func(*corev1.Pod) (*corev1.Pod, error), still func(*corev1.Pod) bool) (*corev1.Pod, error) {
	key := client.ObjectKeyFromObject(pod)
	var written *corev1.Pod
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		next, err := change(pod)
		if err != nil {
			return err
		}
		err = r.Client.Update(ctx, next)
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

// upgrade upgrades one pod's sidecars in place to ss (ref §3.6) and sets its SidecarSetUpgradable
// entry to true.
func (r *Reconciler) upgrade(ctx context.Context, ss *v1alpha1.SidecarSet, pod *corev1.Pod) error {
	written, err := r.writePod(ctx, pod,
		func(p *corev1.Pod) (*corev1.Pod, error) {
			next, _, err := rollout.Upgrade(p, ss, r.now())
			return next, err
		},
		func(fresh *corev1.Pod) bool {
			canUpgrade, consistent := rollout.Upgradability(fresh, ss)
			return rollout.IsManaged(fresh, ss) && !rollout.IsUpdated(fresh, ss) && canUpgrade && consistent
		})
	if err != nil || written == nil {
		return err
	}
	key := client.ObjectKeyFromObject(written)
	r.exp.expect(ss.Name, key, written.ResourceVersion)
	rv, err := r.setUpgradable(ctx, ss, written, true)
	if rv != "" {
		r.exp.expect(ss.Name, key, rv)
	}
	return err
}

// reset puts a hot-upgraded pod's old twin back on the empty image (ref §3.9 step 3), with the
// pod events OpenKruise emits.
func (r *Reconciler) reset(ctx context.Context, ss *v1alpha1.SidecarSet, pod *corev1.Pod) error {
	written, err := r.writePod(ctx, pod,
		func(p *corev1.Pod) (*corev1.Pod, error) {
			next, _, err := rollout.Reset(p, ss, r.now())
			return next, err
		},
		func(fresh *corev1.Pod) bool { return rollout.ReadyToReset(fresh, ss) })
	if err != nil {
		if r.Recorder != nil {
			r.Recorder.Eventf(pod, ss, corev1.EventTypeWarning, "ResetContainerFailed", "Reset", "reset sidecar container image empty failed: %s", err.Error())
		}
		return err
	}
	if written == nil {
		return nil
	}
	r.exp.expect(ss.Name, client.ObjectKeyFromObject(written), written.ResourceVersion)
	if r.Recorder != nil {
		r.Recorder.Eventf(written, ss, corev1.EventTypeNormal, "ResetContainerSucceed", "Reset", "reset sidecar container image empty successfully")
	}
	return nil
}

// setUpgradable sets ss's entry of the pod's SidecarSetUpgradable condition (ref §3.8) when it
// changes, with a strategic-merge status patch. The patch carries the pod's resourceVersion: the
// condition's message holds every SidecarSet's entry, and two SidecarSets reconciled at once must
// not drop each other's. It returns the resourceVersion written ("" when nothing was).
func (r *Reconciler) setUpgradable(ctx context.Context, ss *v1alpha1.SidecarSet, pod *corev1.Pod, upgradable bool) (string, error) {
	key := client.ObjectKeyFromObject(pod)
	var rv string
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cond, changed, err := rollout.UpgradableCondition(pod, ss.Name, upgradable, r.now())
		if err != nil || !changed {
			return err
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": pod.ResourceVersion},
			"status":   map[string]any{"conditions": []corev1.PodCondition{cond}},
		})
		if err != nil {
			return err
		}
		target := pod.DeepCopy()
		err = r.Client.Status().Patch(ctx, target, client.RawPatch(types.StrategicMergePatchType, patch))
		if err == nil {
			rv = target.ResourceVersion
			return nil
		}
		if apierrors.IsConflict(err) {
			fresh := &corev1.Pod{}
			if gerr := r.APIReader.Get(ctx, key, fresh); gerr != nil {
				return gerr
			}
			pod = fresh
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("condition %s: %w", rollout.UpgradableConditionType, err)
	}
	return rv, nil
}
