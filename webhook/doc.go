// Package webhook is the admission face of sidecarops: the three webhooks OpenKruise's would
// otherwise answer (compat §1.1) — PodInjector (pod CREATE, compat §1.12), SidecarSetDefaulter
// (compat §1.8) and SidecarSetValidator (compat §2) — and Register, which mounts them.
//
// It owns the admission plumbing only: which requests a handler looks at, decoding (the pod path
// decodes each AdmissionReview once and encodes its answer by hand, review.go), the response and its
// HTTP code, the admission metrics and the per-pod decision log (docs/operations.md). Every decision
// goes through internal/injector on one engine.Snapshot taken at the start of the request, so a
// snapshot swapped mid-request never mixes two policy states into one answer.
//
// It must not decide, default, validate or mutate anything itself, make API calls, or compile
// anything per request.
package webhook
