package rollout

import (
	"bytes"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/sidecarset/history"
)

// RevisionAction is what must happen to make the SidecarSet's current spec the latest revision.
type RevisionAction string

const (
	// RevisionReuse means the newest revision already records the spec.
	RevisionReuse RevisionAction = "Reuse"
	// RevisionRenumber means an older revision records it (rollback); set its .revision to
	// Latest.Revision.
	RevisionRenumber RevisionAction = "Renumber"
	// RevisionCreate means no revision records it: create Latest. On AlreadyExists with different
	// data, call PlanRevisions again with collisionCount+1 (and store the new count in status).
	RevisionCreate RevisionAction = "Create"
)

// RevisionPlan is the registration and truncation decision of one reconcile (compat §1.10, compat §3.10).
type RevisionPlan struct {
	Action RevisionAction
	// Latest is the revision to create (Create), a renumbered copy of an existing one (Renumber)
	// or the existing newest one (Reuse); its name becomes status.latestRevision.
	Latest *appsv1.ControllerRevision
	// SetCustomVersion, when not empty, is the apps.kruise.io/sidecarset-custom-version value to
	// patch onto Latest (its label differs from the SidecarSet's).
	SetCustomVersion string
	// CustomVersionWarning, when not empty, says that spec.customVersion is no label value (it was
	// stored before validation held it to one), so no revision carries it: the API server would
	// refuse the label, and the revision with it, on every round.
	CustomVersionWarning string
	// Delete are the revisions to delete, oldest first.
	Delete []string
	// TruncateErr says the history stays above the limit because the rest is active; OpenKruise
	// only logs it and carries on.
	TruncateErr error
}

// PlanRevisions decides how ss's ControllerRevisions change this round. existing are the revisions
// listed for ss (label kruise.io/sidecarset-name, controlled by ss or orphaned), pods its managed
// pods (their recorded controllerRevision keeps a revision alive), namespace the kruise namespace
// and collisionCount status.collisionCount. Nothing is modified; the caller applies the plan.
func PlanRevisions(ss *v1beta1.SidecarSet, existing []*appsv1.ControllerRevision, pods []*corev1.Pod, namespace string, collisionCount int32) (RevisionPlan, error) {
	if ss == nil {
		return RevisionPlan{}, fmt.Errorf("rollout: nil SidecarSet")
	}
	revs := make([]*appsv1.ControllerRevision, 0, len(existing))
	for _, cr := range existing {
		if cr != nil {
			revs = append(revs, cr)
		}
	}
	history.Sort(revs)

	next, err := NewRevision(ss, namespace, nextRevision(revs), collisionCount)
	if err != nil {
		return RevisionPlan{}, err
	}
	var equal []*appsv1.ControllerRevision
	for _, cr := range revs {
		if bytes.Equal(cr.Data.Raw, next.Data.Raw) {
			equal = append(equal, cr)
		}
	}

	var plan RevisionPlan
	switch {
	case len(equal) > 0 && equal[len(equal)-1] == revs[len(revs)-1]:
		plan.Action, plan.Latest = RevisionReuse, revs[len(revs)-1]
	case len(equal) > 0:
		old := equal[len(equal)-1]
		renumbered := old.DeepCopy()
		renumbered.Revision = next.Revision
		plan.Action, plan.Latest = RevisionRenumber, renumbered
		// Keep the list ordered with the renumbered revision last, so it is never truncated.
		revs = append(removeRevision(revs, old), renumbered)
	default:
		plan.Action, plan.Latest = RevisionCreate, next
		revs = append(revs, next)
	}
	cv := ss.Spec.CustomVersion
	if msgs := validation.IsValidLabelValue(cv); len(msgs) > 0 {
		plan.CustomVersionWarning = fmt.Sprintf("spec.customVersion %q is no label value (%s): ControllerRevision %s is recorded without the label %s, "+
			"which injectionStrategy.revision.customVersion selects by; set spec.customVersion to a label value",
			cv, strings.Join(msgs, "; "), plan.Latest.Name, v1beta1.SidecarSetCustomVersionLabel)
	} else if cv != "" && plan.Latest.Labels[v1beta1.SidecarSetCustomVersionLabel] != cv {
		plan.SetCustomVersion = cv
	}
	plan.Delete, plan.TruncateErr = truncate(ss, revs, pods)
	return plan, nil
}

// NewRevision builds the ControllerRevision recording ss's current spec (compat §1.10): data.raw
// from history.Raw, name from history.Name, labels = ss's labels + kruise.io/sidecarset-name +
// controller.kubernetes.io/hash + apps.kruise.io/sidecarset-custom-version from spec.customVersion
// when it is a label value, annotations = all of ss's, and a controller owner reference to ss.
func NewRevision(ss *v1beta1.SidecarSet, namespace string, revision int64, collisionCount int32) (*appsv1.ControllerRevision, error) {
	raw, err := history.Raw(ss)
	if err != nil {
		return nil, err
	}
	lbls := map[string]string{}
	for k, v := range ss.Labels {
		lbls[k] = v
	}
	lbls[v1beta1.SidecarSetNameLabel] = ss.Name
	lbls[v1beta1.ControllerRevisionHashLabel] = history.Hash(raw, collisionCount)
	if cv := ss.Spec.CustomVersion; cv != "" && len(validation.IsValidLabelValue(cv)) == 0 {
		lbls[v1beta1.SidecarSetCustomVersionLabel] = cv
	}
	ann := map[string]string{}
	for k, v := range ss.Annotations {
		ann[k] = v
	}
	isController, block := true, true
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:        history.Name(ss, raw, collisionCount),
			Namespace:   namespace,
			Labels:      lbls,
			Annotations: ann,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1beta1.GroupVersion.String(), Kind: "SidecarSet", Name: ss.Name, UID: ss.UID,
				Controller: &isController, BlockOwnerDeletion: &block,
			}},
		},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: revision,
	}, nil
}

func nextRevision(sorted []*appsv1.ControllerRevision) int64 {
	if len(sorted) == 0 {
		return 1
	}
	return sorted[len(sorted)-1].Revision + 1
}

func removeRevision(revs []*appsv1.ControllerRevision, old *appsv1.ControllerRevision) []*appsv1.ControllerRevision {
	out := make([]*appsv1.ControllerRevision, 0, len(revs))
	for _, cr := range revs {
		if cr != old {
			out = append(out, cr)
		}
	}
	return out
}

// ActiveRevisions are the revision names truncation must keep (compat §3.10): those recorded by a
// pod's hash entry, injectionStrategy.revision.revisionName, and the newest revision labelled with
// injectionStrategy.revision.customVersion.
func ActiveRevisions(ss *v1beta1.SidecarSet, revs []*appsv1.ControllerRevision, pods []*corev1.Pod) map[string]bool {
	active := map[string]bool{}
	if ss == nil {
		return active
	}
	for _, pod := range pods {
		if r := PodControllerRevision(pod, ss.Name); r != "" {
			active[r] = true
		}
	}
	if ref := ss.Spec.InjectionStrategy.Revision; ref != nil {
		if ref.RevisionName != nil {
			active[*ref.RevisionName] = true
		}
		if ref.CustomVersion != nil {
			var match []*appsv1.ControllerRevision
			for _, cr := range revs {
				if cr != nil && cr.Labels[v1beta1.SidecarSetCustomVersionLabel] == *ref.CustomVersion {
					match = append(match, cr)
				}
			}
			if len(match) > 0 {
				history.Sort(match)
				active[match[len(match)-1].Name] = true
			}
		}
	}
	return active
}

// truncate is OpenKruise's truncateHistory over revs ordered oldest → latest: with more than
// limit = max(1, revisionHistoryLimit or 10) revisions, delete the oldest inactive ones, never the
// last; if active ones keep the count above the limit, report it.
func truncate(ss *v1beta1.SidecarSet, revs []*appsv1.ControllerRevision, pods []*corev1.Pod) ([]string, error) {
	limit := 10
	if l := ss.Spec.RevisionHistoryLimit; l != nil {
		limit = max(1, int(*l))
	}
	if len(revs) <= limit {
		return nil, nil
	}
	toDelete := len(revs) - limit
	active := ActiveRevisions(ss, revs, pods)
	var del []string
	for i := 0; i < len(revs)-1 && toDelete > 0; i++ {
		if !active[revs[i].Name] {
			del = append(del, revs[i].Name)
			toDelete--
		}
	}
	if toDelete > 0 {
		return del, fmt.Errorf("failed to limit the number of stored revisions, limited: %d, actual: %d, name: %s", limit, limit+toDelete, ss.Name)
	}
	return del, nil
}
