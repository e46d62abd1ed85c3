package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/impact"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

// SidecarSetDefaulter is the SidecarSet defaulting webhook (SidecarSetDefaultPath, compat §1.8): it
// defaults the SidecarSet, writes its two hash annotations and answers the difference as a JSON
// patch. It needs no policy state.
type SidecarSetDefaulter struct {
	// Metrics, when not nil, records the admission latency.
	Metrics *Metrics
}

// Handle implements admission.Handler.
func (h *SidecarSetDefaulter) Handle(_ context.Context, req admission.Request) admission.Response {
	defer h.Metrics.observe(SidecarSetDefaultPath, time.Now())
	w, resp := decodeSidecarSetRequest(req)
	if resp != nil {
		return *resp
	}
	if err := defaults.SidecarSetAndHash(w.Hub); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	// The patch is against what the client wrote, so it is computed in that version.
	obj, err := w.Object()
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	// Diffing against the request's own bytes (not a re-marshalled copy) keeps the patch to what
	// defaulting changed. This is not the hot path, so a generic diff is good enough.
	return admission.PatchResponseFromRaw(req.Object.Raw, out)
}

// SidecarSetValidator is the SidecarSet validating webhook (SidecarSetValidatePath, compat §2). It
// validates the defaulted object (decision D5): its single-object rules first and, only
// when those pass, conflicts with the snapshot's other SidecarSets and the patchPodMetadata
// whitelist, as OpenKruise does. Failures are denied with 422 Invalid (decision D6).
type SidecarSetValidator struct {
	// Snapshots serves the policy state (other SidecarSets, ControllerRevisions, whitelist);
	// *engine.Engine satisfies it.
	Snapshots Snapshots
	// Metrics, when not nil, records the admission latency.
	Metrics *Metrics
	// Prefilter, when not nil, widens the pod webhook's match condition for an admitted SidecarSet
	// before the API server stores it (*prefilter.Widener). A SidecarSet it cannot widen for is
	// refused: stored, its pods would reach no webhook until the elected replica caught up.
	Prefilter interface {
		Widen(ctx context.Context, ss, old *v1beta1.SidecarSet) error
	}
	// Impacts, when not nil, gives the SidecarSet policies the impact view (the manager's caches);
	// nil: the policies see none.
	Impacts Impacts
	// DecisionLog receives one line per SidecarSet the policies were asked about; the zero Logger
	// turns it off.
	DecisionLog logr.Logger
}

// Impacts computes a SidecarSet's impact view (docs/governing.md, "Input").
type Impacts interface {
	Impact(ctx context.Context, ss *v1beta1.SidecarSet) (*impact.View, error)
}

// Handle implements admission.Handler.
func (h *SidecarSetValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	defer h.Metrics.observe(SidecarSetValidatePath, time.Now())
	w, resp := decodeSidecarSetRequest(req)
	if resp != nil {
		return *resp
	}
	ss := w.Hub
	var old *v1beta1.SidecarSet
	if req.Operation == admissionv1.Update {
		ow, err := decodeSidecarSet(req.Kind, req.OldObject.Raw, "old SidecarSet")
		if err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		old = ow.Hub
	}
	snap := current(h.Snapshots)
	if snap == nil {
		return admission.Errored(http.StatusServiceUnavailable, errNotLoaded)
	}

	errs, err := injector.ValidateSidecarSet(ctx, snap, ss, old)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	errs = w.Errors(errs)
	if len(errs) > 0 {
		status := apierrors.NewInvalid(sidecarSetKind.GroupKind(), ss.Name, errs).Status()
		return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
	}
	gov, err := h.govern(ctx, snap, req, ss, old)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if refusal := gov.Refusal(); refusal != "" {
		status := apierrors.NewForbidden(sidecarSetResource, ss.Name, errors.New(refusal)).Status()
		resp := admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
		return resp.WithWarnings(gov.Warnings()...)
	}
	// A dry run must have no side effects (the registration says sideEffects: NoneOnDryRun).
	if h.Prefilter != nil && !ptr.Deref(req.DryRun, false) {
		if err := h.Prefilter.Widen(ctx, ss, old); err != nil {
			h.Metrics.countPrefilterFailure()
			ctrllog.FromContext(ctx).Error(err, "refusing the SidecarSet: its pods would not reach the pod webhook", "sidecarSet", ss.Name)
			return admission.Errored(http.StatusServiceUnavailable, err)
		}
	}
	return admission.Allowed("").WithWarnings(gov.Warnings()...)
}

var sidecarSetResource = v1beta1.GroupVersion.WithResource("sidecarsets").GroupResource()

// govern asks the SidecarSet policies about ss (defaulted; old too on UPDATE), counts their
// findings and logs the decision with the policy revisions it was made with.
func (h *SidecarSetValidator) govern(ctx context.Context, snap *engine.Snapshot, req admission.Request, ss, old *v1beta1.SidecarSet) (injector.Governance, error) {
	r := engine.Review{Operation: string(req.Operation), UserInfo: engine.NewUserInfo(req.UserInfo), SidecarSet: ss, OldSidecarSet: old}
	if h.Impacts != nil {
		view, err := h.Impacts.Impact(ctx, ss)
		if err != nil {
			return injector.Governance{}, fmt.Errorf("SidecarSet/%s impact view: %w", ss.Name, err)
		}
		r.Impact = view
	}
	gov, err := injector.GovernSidecarSet(ctx, snap, r)
	if err != nil {
		return gov, err
	}
	for _, fs := range [][]engine.Finding{gov.Deny, gov.Warn, gov.DryRun} {
		for _, f := range fs {
			h.Metrics.countPolicyFinding(f.Rule, f.Action)
		}
	}
	if log := h.DecisionLog; log.Enabled() {
		kv := []any{"sidecarSet", ss.Name, "operation", req.Operation, "uid", req.UID, "user", req.UserInfo.Username,
			"allowed", len(gov.Deny) == 0, "deny", gov.Deny, "warn", gov.Warn, "dryrun", gov.DryRun,
			"podSecurity", gov.PodSecurity, "revision", snap.Revision(), "adminRevisions", snap.AdminRevisions()}
		if r.Impact != nil {
			kv = append(kv, "namespaces", len(r.Impact.Namespaces), "pods", r.Impact.Pods)
		}
		log.Info("sidecarset admission", kv...)
	}
	return gov, nil
}
