package webhook

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sidecarops/sidecarops/internal/promreg"
)

// Results of a pod decision, the values of the decisions counter's "result" label.
const (
	// ResultPatched: SidecarSets matched and a patch adding them was returned. Whether the API
	// server then stores the pod (another webhook or its own validation may still refuse it) is
	// not known here, hence not "injected".
	ResultPatched    = "patched"
	ResultNotMatched = "not-matched" // no SidecarSet matched the pod
	ResultGated      = "gated"       // an administrator's gate vetoed injection; the pod was admitted as is
	ResultInactive   = "inactive"    // the pod had finished or was being deleted; admitted as is, nothing decided
	ResultError      = "error"       // the pod was not admitted: bad request, no policies, engine or injection failure
)

// Metrics are the admission metrics. A nil *Metrics records nothing.
type Metrics struct {
	latency   *prometheus.HistogramVec
	decisions *prometheus.CounterVec
	throttled *prometheus.CounterVec
	widening  prometheus.Counter
	findings  *prometheus.CounterVec
	worsened  prometheus.Counter
}

// NewMetrics creates the metrics and registers them on reg (nil: controller-runtime's
// metrics.Registry, which the manager serves). Calling it again with the same registry returns
// metrics backed by the collectors already registered, so handlers built twice share one series.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		reg = metrics.Registry
	}
	latency, err := promreg.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sidecarops_webhook_admission_duration_seconds",
		Help: "Time the sidecarops admission handlers take to answer, by webhook path (decoding of the AdmissionReview excluded).",
		// From 25µs: a pod decision and injection take tens of microseconds, controller-runtime's own
		// histogram starts at 5ms and would put every admission in its first bucket.
		Buckets: prometheus.ExponentialBuckets(25e-6, 2, 17),
	}, []string{"webhook"}))
	if err != nil {
		return nil, err
	}
	decisions, err := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sidecarops_webhook_pod_decisions_total",
		Help: "Pod admissions by result: patched (a patch adding sidecars was returned; the API server may still refuse the pod for other reasons), not-matched, gated (an administrator's gate vetoed injection), inactive, error.",
	}, []string{"result"}))
	if err != nil {
		return nil, err
	}
	throttled, err := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sidecarops_webhook_throttled_total",
		Help: "Admission requests refused with 429 Too Many Requests because the path's room was taken (webhook.Limits), by webhook path; webhook=\"connections\" counts connections that found every slot taken (--webhook-max-connections) and waited for one.",
	}, []string{"webhook"}))
	if err != nil {
		return nil, err
	}
	widening, err := promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sidecarops_webhook_prefilter_widen_failures_total",
		Help: "SidecarSets refused because the pod webhook's match condition could not be widened for them at admission.",
	}))
	if err != nil {
		return nil, err
	}
	findings, err := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sidecarops_webhook_sidecarset_policy_findings_total",
		Help: "Findings of the administrators' SidecarSet policies at SidecarSet admission, by rule and enforcement action (deny, warn, dryrun).",
	}, []string{"rule", "action"}))
	if err != nil {
		return nil, err
	}
	worsened, err := promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sidecarops_webhook_pod_security_violations_total",
		Help: "Pods that passed their namespace's enforced Pod Security level before injection and fail it after (warned and recorded as an Event; Pod Security then refuses them).",
	}))
	if err != nil {
		return nil, err
	}
	// Every series exists from the start, so rate() and absence alerts work before the first event.
	for _, p := range []string{PodPath, SidecarSetDefaultPath, SidecarSetValidatePath} {
		latency.WithLabelValues(p)
	}
	for _, p := range []string{PodPath, SidecarSetDefaultPath, SidecarSetValidatePath, ConvertPath, ConnectionsLabel} {
		throttled.WithLabelValues(p)
	}
	for _, r := range []string{ResultPatched, ResultNotMatched, ResultGated, ResultInactive, ResultError} {
		decisions.WithLabelValues(r)
	}
	return &Metrics{latency: latency, decisions: decisions, throttled: throttled, widening: widening, findings: findings, worsened: worsened}, nil
}

// observe records the latency of one admission that started at start.
func (m *Metrics) observe(path string, start time.Time) {
	if m == nil {
		return
	}
	m.latency.WithLabelValues(path).Observe(time.Since(start).Seconds())
}

func (m *Metrics) throttle(path string) {
	if m == nil {
		return
	}
	m.throttled.WithLabelValues(path).Inc()
}

func (m *Metrics) decision(result string) {
	if m == nil {
		return
	}
	m.decisions.WithLabelValues(result).Inc()
}

func (m *Metrics) countPrefilterFailure() {
	if m == nil {
		return
	}
	m.widening.Inc()
}

func (m *Metrics) countPolicyFinding(rule, action string) {
	if m == nil {
		return
	}
	m.findings.WithLabelValues(rule, action).Inc()
}

func (m *Metrics) countPodSecurityViolation() {
	if m == nil {
		return
	}
	m.worsened.Inc()
}
