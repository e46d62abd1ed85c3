package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/defaults"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/validation"
)

// SidecarSetDefaulter is the SidecarSet defaulting webhook (SidecarSetDefaultPath, ref §1.8): it
// defaults the SidecarSet, writes its two hash annotations and answers the difference as a JSON
// patch. It needs no policy state.
type SidecarSetDefaulter struct {
	// Metrics, when not nil, records the admission latency.
	Metrics *Metrics
}

// Handle implements admission.Handler.
func (h *SidecarSetDefaulter) Handle(_ context.Context, req admission.Request) admission.Response {
	defer h.Metrics.observe(SidecarSetDefaultPath, time.Now())
	if skipSidecarSet(req) {
		return admission.Allowed("")
	}
	if resp := checkSidecarSetKind(req); resp != nil {
		return *resp
	}
	ss := &v1alpha1.SidecarSet{}
	if err := decodeObject(req.Object, "SidecarSet", ss); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if err := defaults.SidecarSetAndHash(ss); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	out, err := json.Marshal(ss)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	// Diffing against the request's own bytes (not a re-marshalled copy) keeps the patch to what
	// defaulting changed. This is not the hot path, so a generic diff is good enough.
	return admission.PatchResponseFromRaw(req.Object.Raw, out)
}

// SidecarSetValidator is the SidecarSet validating webhook (SidecarSetValidatePath, ref §2). It
// validates the defaulted object (sidecarops decision 5): its single-object rules first and, only
// when those pass, conflicts with the snapshot's other SidecarSets and the patchPodMetadata
// whitelist, as OpenKruise does. Failures are denied with 422 Invalid (decision 6).
type SidecarSetValidator struct {
	// Snapshots serves the policy state (other SidecarSets, ControllerRevisions, whitelist);
	// *engine.Engine satisfies it.
	Snapshots Snapshots
	// Metrics, when not nil, records the admission latency.
	Metrics *Metrics
}

// Handle implements admission.Handler.
func (h *SidecarSetValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	defer h.Metrics.observe(SidecarSetValidatePath, time.Now())
	if skipSidecarSet(req) {
		return admission.Allowed("")
	}
	if resp := checkSidecarSetKind(req); resp != nil {
		return *resp
	}
	ss := &v1alpha1.SidecarSet{}
	if err := decodeObject(req.Object, "SidecarSet", ss); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var old *v1alpha1.SidecarSet
	if req.Operation == admissionv1.Update {
		old = &v1alpha1.SidecarSet{}
		if err := decodeObject(req.OldObject, "old SidecarSet", old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	snap := current(h.Snapshots)
	if snap == nil {
		return admission.Errored(http.StatusServiceUnavailable, errNotLoaded)
	}

	// In a cluster the defaulting webhook has already run, and defaulting twice changes nothing;
	// offline callers and a reordered webhook configuration get the same answer. The old object
	// is validated as stored: defaulting it could make an upgradeType that was never set look
	// immutable.
	defaults.SidecarSet(ss)
	errs := validation.SidecarSet(ss, old, snap.Revisions(), snap)
	if len(errs) == 0 {
		var err error
		if errs, err = policyErrors(ctx, snap, ss); err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
	}
	if len(errs) > 0 {
		status := apierrors.NewInvalid(sidecarSetKind.GroupKind(), ss.Name, errs).Status()
		return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
	}
	return admission.Allowed("")
}

// policyErrors asks the snapshot's policies about conflicts and the whitelist, as field errors in a
// stable order. On UPDATE the snapshot still holds the old version under the same name; the conflict
// policy never compares a SidecarSet with its namesake.
func policyErrors(ctx context.Context, snap *engine.Snapshot, ss *v1alpha1.SidecarSet) (field.ErrorList, error) {
	conflicts, err := snap.Conflicts(ctx, ss)
	if err != nil {
		return nil, err
	}
	denied, err := snap.Whitelist(ctx, ss)
	if err != nil {
		return nil, err
	}
	var errs field.ErrorList
	for _, v := range append(conflicts, denied...) {
		fe := v.FieldError()
		// Decision 6: a denial names the other object. The policies' messages already do (they are
		// OpenKruise's); this only guards against a policy whose message would not.
		if v.Other != "" && !strings.Contains(fe.Detail, v.Other) {
			fe.Detail += fmt.Sprintf(" (SidecarSet %s)", v.Other)
		}
		errs = append(errs, fe)
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs, nil
}
