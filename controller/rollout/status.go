package rollout

import (
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// Status computes ss's status over its managed pods (those passing IsManaged) as OpenKruise's
// calculateStatus does (compat §3.4). latestRevision and collisionCount come from the revision
// decision (Revisions). It depends on nothing but its arguments, so the controller can recompute
// it on any pod event, deletions included (unlike OpenKruise, quirk Q16).
func Status(ss *v1beta1.SidecarSet, pods []*corev1.Pod, latestRevision string, collisionCount int32) v1beta1.SidecarSetStatus {
	return CountPods(ss, pods).Status(ss, latestRevision, collisionCount)
}

// CountPods is the sum of the pods' PodCounts.
func CountPods(ss *v1beta1.SidecarSet, pods []*corev1.Pod) Counts {
	var c Counts
	for _, pod := range pods {
		if pod != nil {
			c = c.Add(PodCounts(pod, ss))
		}
	}
	return c
}

// Counts are the pod counts of a SidecarSet's status: a sum of PodCounts, which the controller keeps
// per pod so that a pod's change is accounted for without counting the others again.
type Counts struct {
	Matched, Updated, Ready, UpdatedReady int32
}

// PodCounts is what one managed pod adds to ss's status counts.
func PodCounts(pod *corev1.Pod, ss *v1beta1.SidecarSet) Counts {
	c := Counts{Matched: 1}
	updated := IsUpdated(pod, ss)
	if updated {
		c.Updated = 1
	}
	if IsPodStateConsistent(pod, ss, nil) && IsPodReady(pod, ss) {
		c.Ready = 1
		if updated {
			c.UpdatedReady = 1
		}
	}
	return c
}

// Add is c plus d.
func (c Counts) Add(d Counts) Counts {
	return Counts{c.Matched + d.Matched, c.Updated + d.Updated, c.Ready + d.Ready, c.UpdatedReady + d.UpdatedReady}
}

// Sub is c minus d.
func (c Counts) Sub(d Counts) Counts {
	return Counts{c.Matched - d.Matched, c.Updated - d.Updated, c.Ready - d.Ready, c.UpdatedReady - d.UpdatedReady}
}

// Status is the SidecarSet status these counts give, with the revision decision's results.
func (c Counts) Status(ss *v1beta1.SidecarSet, latestRevision string, collisionCount int32) v1beta1.SidecarSetStatus {
	st := v1beta1.SidecarSetStatus{
		LatestRevision: latestRevision, CollisionCount: &collisionCount,
		MatchedPods: c.Matched, UpdatedPods: c.Updated, ReadyPods: c.Ready, UpdatedReadyPods: c.UpdatedReady,
	}
	if ss != nil {
		st.ObservedGeneration = ss.Generation
		// Conditions are not counted from pods: the controller sets them apart.
		st.Conditions = ss.Status.Conditions
	}
	return st
}

// StatusEqual reports whether two statuses are the same, so that the controller writes the
// status subresource only when something changed (collisionCount compared by value, nil and empty
// conditions alike).
func StatusEqual(a, b v1beta1.SidecarSetStatus) bool {
	return apiequality.Semantic.DeepEqual(a, b)
}

// UpgradableConditionType is the pod condition listing, per SidecarSet, whether the pod's
// sidecars can be upgraded in place (compat §1.11, compat §3.8).
const UpgradableConditionType corev1.PodConditionType = "SidecarSetUpgradable"

// UpgradableCondition returns the pod's SidecarSetUpgradable condition with ss's entry set to
// upgradable, and whether it differs from the pod's current one (only then is a status patch
// needed). The message is the JSON map {sidecarSet: bool} of all SidecarSets; the status is True
// (reason AllSidecarsetUpgradable) only when every entry is true, else False (reason
// UpdateImmutableField). lastTransitionTime moves to now only when the status flips, as
// Kubernetes' UpdatePodCondition does. An unparsable existing message is an error: OpenKruise
// refuses to overwrite it too, because the other SidecarSets' entries would be lost.
func UpgradableCondition(pod *corev1.Pod, ssName string, upgradable bool, now time.Time) (corev1.PodCondition, bool, error) {
	var old *corev1.PodCondition
	if pod != nil {
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == UpgradableConditionType {
				old = &pod.Status.Conditions[i]
				break
			}
		}
	}
	cond := corev1.PodCondition{Type: UpgradableConditionType}
	if old != nil {
		cond = *old.DeepCopy()
	}
	kv := map[string]bool{}
	if cond.Message != "" {
		if err := json.Unmarshal([]byte(cond.Message), &kv); err != nil {
			return cond, false, err
		}
		if kv == nil {
			kv = map[string]bool{}
		}
	}
	kv[ssName] = upgradable
	all := true
	for _, v := range kv {
		all = all && v
	}
	if all {
		cond.Status, cond.Reason = corev1.ConditionTrue, "AllSidecarsetUpgradable"
	} else {
		cond.Status, cond.Reason = corev1.ConditionFalse, "UpdateImmutableField"
	}
	msg, _ := json.Marshal(kv) // map[string]bool always encodes; keys sorted
	cond.Message = string(msg)
	if old == nil || old.Status != cond.Status {
		cond.LastTransitionTime = metav1.NewTime(now)
	}
	changed := old == nil || old.Status != cond.Status || old.Reason != cond.Reason || old.Message != cond.Message
	return cond, changed, nil
}
