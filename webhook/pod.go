package webhook

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/tidwall/gjson"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/mutation"
)

// PodInjector is the pod mutating webhook (PodPath, compat §1.12): it asks the policies which
// SidecarSets match a pod being created and answers the mutation core's patch. It is an
// http.Handler of its own (ServeHTTP, review.go) rather than an admission.Handler: it decodes each
// AdmissionReview once, keeping the pod as the request's raw bytes for the decision. The zero value
// denies every pod (no snapshots); set Snapshots.
type PodInjector struct {
	// Snapshots serves the policy state; *engine.Engine satisfies it.
	Snapshots Snapshots
	// Injector renders the injection. Nil uses the wall clock and math/rand/v2, which are safe for
	// concurrent requests.
	Injector *mutation.Injector
	// Metrics, when not nil, records the admission latency and the decision result.
	Metrics *Metrics
	// FailOpen admits a pod unchanged, with a warning, while no snapshot is loaded, instead of
	// answering 503: the manager's half of a fail-open installation (config/components/fail-open),
	// whose failurePolicy Ignore covers only a webhook that cannot be reached.
	FailOpen bool
	// DecisionLog receives one line per pod decision (namespace, pod name or generateName, matched
	// and injected SidecarSets, gates' reasons, bundle revision, duration). The zero Logger, or any
	// disabled one, turns it off at the cost of one check.
	DecisionLog logr.Logger
	// NoInjectionCache answers every pod by deciding and injecting it, never from the per-pod
	// cache: for an operator who suspects the cache (the manager's --injection-cache=false).
	NoInjectionCache bool
	// AfterOpenKruise answers pods that OpenKruise's pod webhook, kept for everything else it does,
	// has already injected (migration path B): its SidecarSet injection is taken back and sidecarops'
	// put in its place, keeping OpenKruise's containers where both agree (injector.AfterOpenKruise).
	// No pod is answered from the per-pod cache.
	AfterOpenKruise bool
	// PodSecurity, when not nil, warns about and records pods that injection makes fail their
	// namespace's enforced Pod Security level. Their pods are injected without the per-pod cache.
	PodSecurity *PodSecurity

	// panics, when set, lets a panic of the handler through instead of answering 500 (tests).
	panics bool
	// gate holds the server's Limits; Register sets it. Nil: no limits (a handler used directly).
	gate *gate
	// cache answers a ReplicaSet's pods after the first (injector.Cache: exact, per snapshot).
	cache injector.Cache
}

var defaultInjector = &mutation.Injector{Now: time.Now, Rand: rand.Float64}

var podResource = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}

// podDecision is what one admission did, for the metrics and the decision log.
type podDecision struct {
	namespace, pod string
	result         string
	revision       string
	matched        []string
	injected       []string
	denied         []string
	withheld       []string
	err            error
}

// admitPod answers one decoded admission request; start is when its handling began.
func (p *PodInjector) admitPod(ctx context.Context, req *reviewRequest, start time.Time) reviewResponse {
	defer p.Metrics.observe(PodPath, start)

	// compat §1.12 step 1: only the creation of a pod itself is injected. OpenKruise's UPDATE branch
	// re-injects nothing with the open-source control, so UPDATE is let through like anything else.
	if req.SubResource != "" || req.Operation != admissionv1.Create ||
		req.Resource.Group != podResource.Group || req.Resource.Resource != podResource.Resource {
		return allowed("")
	}
	snap := current(p.Snapshots)
	inj := p.Injector
	if inj == nil {
		inj = defaultInjector
	}
	enforced := p.PodSecurity.enforced(req.Namespace)
	if snap != nil && !p.AfterOpenKruise && enforced == nil {
		// A ReplicaSet's pods after the first are answered before they are decoded, which costs
		// more than deciding and injecting.
		res, ok, next := p.podCache().Answer(snap, inj, req.Namespace, req.Object)
		if ok {
			resp, d := respond(res, nil, podDecision{namespace: res.Namespace, pod: rawPodName(req.Object), revision: snap.Revision()})
			return p.finish(req, d, start, resp)
		}
		inj = next
	}
	pod := &corev1.Pod{}
	if err := decodeObject(req.Object, "pod", pod); err != nil {
		d := podDecision{namespace: req.Namespace, pod: req.Name, result: ResultError, err: err}
		return p.finish(req, d, start, errored(http.StatusBadRequest, err))
	}
	resp, d := p.admit(ctx, req, pod, snap, inj, enforced)
	return p.finish(req, d, start, resp)
}

// admit runs the one injection path with one snapshot and turns its result into the answer.
// enforced is the labels of a namespace enforcing a Pod Security level (PodSecurity.enforced).
func (p *PodInjector) admit(ctx context.Context, req *reviewRequest, pod *corev1.Pod, snap *engine.Snapshot, inj *mutation.Injector, enforced map[string]string) (reviewResponse, podDecision) {
	d := podDecision{namespace: pod.Namespace, pod: podName(pod), result: ResultError}
	if snap == nil {
		d.err = errNotLoaded
		if p.FailOpen {
			resp := allowed("no sidecars injected: " + errNotLoaded.Error())
			resp.warnings = []string{"sidecarops: no sidecars injected: " + errNotLoaded.Error() + " (fail-open)"}
			return resp, d
		}
		return errored(http.StatusServiceUnavailable, errNotLoaded), d
	}
	d.revision = snap.Revision()
	// The answer is the patch; the injected pod itself is read only to check it against Pod Security.
	pr := injector.PodRequest{Pod: pod, Raw: req.Object, Decoded: true, Namespace: req.Namespace, PatchOnly: enforced == nil}
	var res injector.PodResult
	var err error
	switch {
	case p.AfterOpenKruise:
		res, err = injector.AfterOpenKruise(ctx, snap, inj, pr)
	case enforced != nil:
		res, err = injector.Pod(ctx, snap, inj, pr)
	default:
		res, err = p.podCache().Pod(ctx, snap, inj, pr)
	}
	resp, d := respond(res, err, d)
	if err == nil && resp.allowed {
		p.PodSecurity.check(p.Metrics, snap, enforced, pod, res, &resp, req.DryRun)
	}
	return resp, d
}

// podCache is the per-pod cache, nil (which caches nothing) when it is turned off.
func (p *PodInjector) podCache() *injector.Cache {
	if p.NoInjectionCache {
		return nil
	}
	return &p.cache
}

// respond turns what the injection path answered into the review's answer.
func respond(res injector.PodResult, err error, d podDecision) (reviewResponse, podDecision) {
	resp, d := outcome(res, err, d)
	// Only after OpenKruise's webhook does a pod that gets nothing have something taken back.
	if len(res.Patch) > 0 && resp.allowed {
		resp.patch = res.Patch
	}
	return resp, d
}

// outcome is the answer res and err call for, the patch aside.
func outcome(res injector.PodResult, err error, d podDecision) (reviewResponse, podDecision) {
	d.result = ResultError
	d.namespace, d.matched, d.denied = res.Namespace, res.Matched, res.Denied
	if ie := (*injector.InjectionError)(nil); errors.As(err, &ie) {
		d.err = err
		return denied(err.Error()), d
	}
	if err != nil {
		d.err = err
		return errored(http.StatusInternalServerError, err), d
	}
	switch res.Outcome {
	case injector.Inactive:
		d.result = ResultInactive
		return allowed(""), d
	case injector.Gated:
		d.result = ResultGated
		resp := allowed("no sidecars injected: denied by policy: " + strings.Join(res.Denied, "; "))
		resp.warnings = make([]string, len(res.Denied))
		for i, r := range res.Denied {
			resp.warnings[i] = "sidecarops: no sidecars injected: " + r
		}
		return resp, d
	case injector.NotMatched:
		d.result = ResultNotMatched
		return allowed(""), d
	}
	d.result = ResultPatched
	d.injected, d.withheld = res.Injected, withheldNames(res.Withheld)
	resp := allowed("")
	for _, w := range res.Withheld {
		resp.warnings = append(resp.warnings, WithheldWarning(w))
	}
	return resp, d
}

// finish records the decision and returns resp.
func (p *PodInjector) finish(req *reviewRequest, d podDecision, start time.Time, resp reviewResponse) reviewResponse {
	p.Metrics.decision(d.result)
	if log := p.DecisionLog; log.Enabled() {
		kv := []any{
			"namespace", d.namespace, "pod", d.pod, "uid", req.UID, "result", d.result,
			"matched", d.matched, "injected", d.injected, "denied", d.denied, "withheld", d.withheld,
			"revision", d.revision, "duration", time.Since(start),
		}
		if d.err != nil {
			log.Error(d.err, "pod admission", kv...)
		} else {
			log.Info("pod admission", kv...)
		}
	}
	return resp
}

// WithheldWarning is the admission warning for a SidecarSet withheld from a pod (decision D7).
func WithheldWarning(w engine.Withheld) string {
	return fmt.Sprintf("sidecarops: SidecarSet %s not injected: it collides with SidecarSet %s, which is older (see the Conflict condition of both)", w.SidecarSet, w.CollidesWith)
}

func withheldNames(ws []engine.Withheld) []string {
	if len(ws) == 0 {
		return nil
	}
	names := make([]string, len(ws))
	for i, w := range ws {
		names[i] = w.SidecarSet
	}
	return names
}

// podName names the pod as far as it is named at creation: its generateName until the API server
// has generated the name.
func podName(pod *corev1.Pod) string {
	if pod.Name != "" {
		return pod.Name
	}
	return pod.GenerateName
}

// rawPodName is podName for a pod not decoded.
func rawPodName(raw []byte) string {
	if name := gjson.GetBytes(raw, "metadata.name").Str; name != "" {
		return name
	}
	return gjson.GetBytes(raw, "metadata.generateName").Str
}
