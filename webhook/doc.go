// Package webhook is the admission face of sidecarops: the three webhooks OpenKruise's would
// otherwise answer (compat §1.1), and the helper that mounts them. The SidecarSet handlers are
// controller-runtime admission.Handlers; the pod injector, the hot path, is an http.Handler of its
// own that decodes each admission.k8s.io/v1 AdmissionReview once and encodes its answer by hand
// (review.go).
//
//   - PodInjector (PodPath, pod CREATE): injects the SidecarSets the policies match (compat §1.12).
//   - SidecarSetDefaulter (SidecarSetDefaultPath, CREATE/UPDATE): defaults and hashes (compat §1.8).
//   - SidecarSetValidator (SidecarSetValidatePath, CREATE/UPDATE): single-object rules, then
//     conflicts and the patchPodMetadata whitelist (compat §2).
//
// It owns the admission plumbing only: which requests a handler looks at (subresources, kinds,
// versions, operations), decoding the objects, choosing the response (patch, allow, deny and its
// HTTP code), the Prometheus metrics of admissions and the per-pod decision log line.
//
// It must not decide or mutate anything itself: which SidecarSets match a pod, gates, conflicts and
// the whitelist are the policies' (package engine answers them), defaulting is package defaults',
// single-object validation package validation's, and the pod and its RFC 6902 patch are package
// mutation's. The handlers make no API calls and compile nothing per request: every request reads
// one immutable engine.Snapshot, taken once at its start, so a snapshot swapped mid-request never
// mixes two policy states into one answer.
//
// Metrics (NewMetrics, on controller-runtime's registry by default):
// sidecarops_webhook_admission_duration_seconds{webhook=<path>} and
// sidecarops_webhook_pod_decisions_total{result=injected|not-matched|gated|inactive|error}. The decision log
// is PodInjector.DecisionLog, off when it is the zero logr.Logger.
//
// Response codes, and why:
//   - A malformed request (no object, undecodable object, wrong kind or version; for the pod
//     webhook also an AdmissionReview other than admission.k8s.io/v1): 400.
//   - No snapshot yet ("policies not loaded yet"): 503. The manager reports ready only after the
//     first compile, so this is a start-up race the API server's retry resolves.
//   - The engine failing to evaluate: 500, a server fault.
//   - A pod the matched SidecarSets cannot be injected into (invalid MergePatchJson, missing
//     revision, resourcesPolicy that selects nothing, …): denied (403) with the SidecarSet and field
//     at fault. OpenKruise denies too (with 500); the failure is deterministic, not a server fault.
//   - A SidecarSet that fails validation: 422 Invalid with every field error as a cause (sidecarops
//     decision D6; OpenKruise answers 500).
//   - Gates' denials are not admission denials: the pod is admitted without sidecars, and the
//     reasons are the response message and warnings.
package webhook
