package controller

import (
	"bytes"
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/controller/rollout"
)

// ReasonInvalidCustomVersion is the Event that says a SidecarSet's spec.customVersion is on no
// ControllerRevision, because it is no label value.
const ReasonInvalidCustomVersion = "InvalidCustomVersion"

// maxCollisions bounds the name-collision retries of one round; each needs another object with
// the same name and different data, which only a deliberate clash produces.
const maxCollisions = 16

// registerRevision applies rollout.PlanRevisions (compat §1.10, compat §3.10): it creates, renumbers or reuses
// the revision recording ss's spec, keeps its custom-version label current and truncates the
// history. It returns the latest revision's name and the collision count to store in status.
func (r *Reconciler) registerRevision(ctx context.Context, ss *v1beta1.SidecarSet, pods []*corev1.Pod) (string, int32, error) {
	existing, err := r.revisions(ctx, ss)
	if err != nil {
		return "", 0, err
	}
	var collisionCount int32
	if ss.Status.CollisionCount != nil {
		collisionCount = *ss.Status.CollisionCount
	}
	for range maxCollisions {
		plan, err := rollout.PlanRevisions(ss, existing, pods, r.Namespace, collisionCount)
		if err != nil {
			return "", 0, err
		}
		if plan.CustomVersionWarning != "" {
			r.eventOnChange(&r.lastCustomVersion, ss, corev1.EventTypeWarning, ReasonInvalidCustomVersion, "Register", plan.CustomVersionWarning)
		}
		latest := plan.Latest
		switch plan.Action {
		case rollout.RevisionCreate:
			err := r.Client.Create(ctx, latest)
			if apierrors.IsAlreadyExists(err) {
				found := &appsv1.ControllerRevision{}
				if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(latest), found); err != nil {
					return "", 0, err
				}
				if !bytes.Equal(found.Data.Raw, latest.Data.Raw) {
					collisionCount++
					continue
				}
				// Ours from an earlier round that the cache has not shown yet.
				latest = found
			} else if err != nil {
				return "", 0, err
			}
		case rollout.RevisionRenumber:
			if err := r.Client.Update(ctx, latest); err != nil {
				return "", 0, err
			}
		}
		if plan.SetCustomVersion != "" {
			// A merge patch of the label alone: the revision's data is immutable and must not be resent.
			labelled := latest.DeepCopy()
			if labelled.Labels == nil {
				labelled.Labels = map[string]string{}
			}
			labelled.Labels[v1beta1.SidecarSetCustomVersionLabel] = plan.SetCustomVersion
			if err := r.Client.Patch(ctx, labelled, client.MergeFrom(latest)); err != nil {
				return "", 0, err
			}
		}
		for _, name := range plan.Delete {
			cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.Namespace}}
			if err := r.Client.Delete(ctx, cr); err != nil && !apierrors.IsNotFound(err) {
				return "", 0, err
			}
		}
		if plan.TruncateErr != nil {
			// OpenKruise logs and carries on: the revisions are in use by pods or injection.
			ctrllog.FromContext(ctx).Info("revision history above its limit", "reason", plan.TruncateErr.Error())
		}
		return latest.Name, collisionCount, nil
	}
	return "", 0, fmt.Errorf("%d ControllerRevision name collisions in a row for SidecarSet %s", maxCollisions, ss.Name)
}

// revisions lists ss's ControllerRevisions from the cache: labelled with its name and controlled
// by it, or by nothing (adoptable, as Kubernetes' history listing allows).
func (r *Reconciler) revisions(ctx context.Context, ss *v1beta1.SidecarSet) ([]*appsv1.ControllerRevision, error) {
	var list appsv1.ControllerRevisionList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.Namespace), client.MatchingLabels{v1beta1.SidecarSetNameLabel: ss.Name}); err != nil {
		return nil, fmt.Errorf("listing ControllerRevisions: %w", err)
	}
	out := make([]*appsv1.ControllerRevision, 0, len(list.Items))
	for i := range list.Items {
		cr := &list.Items[i]
		if ref := metav1.GetControllerOf(cr); ref == nil || ref.UID == ss.UID {
			out = append(out, cr)
		}
	}
	return out, nil
}
