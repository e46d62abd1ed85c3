package loader

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sidecarops/sidecarops/internal/promreg"
)

const (
	resultSuccess = "success"
	resultFailure = "failure"
)

// Metrics are the loader's Prometheus collectors. Names are documented in docs/operations.md#metrics.
type Metrics struct {
	compileDuration *prometheus.HistogramVec
	compiles        *prometheus.CounterVec
	lastSuccess     prometheus.Gauge
	snapshotInfo    *prometheus.GaugeVec
	activations     *prometheus.CounterVec
	bundleInfo      *prometheus.GaugeVec
	sourceErrors    *prometheus.CounterVec
	sourceSuccess   *prometheus.GaugeVec
	refused         *prometheus.GaugeVec
	refusedPolls    *prometheus.CounterVec
	partial         prometheus.Gauge
}

// NewMetrics creates the metrics and registers them on r (nil: controller-runtime's
// metrics.Registry, which the manager serves). Calling it again with the same registry returns
// metrics backed by the collectors already registered, so loaders built twice share one series.
func NewMetrics(r prometheus.Registerer) (*Metrics, error) {
	if r == nil {
		r = ctrlmetrics.Registry
	}
	m := &Metrics{
		compileDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sidecarops_policy_compile_duration_seconds",
			Help: "Time to compile the policy bundle and prepare the engine's snapshot, by result.",
			// 10 ms (a handful of SidecarSets) to about 20 s (well beyond 10,000).
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}, []string{"result"}),
		compiles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidecarops_policy_compiles_total",
			Help: "Policy compiles by result; on failure the previous snapshot keeps serving.",
		}, []string{"result"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sidecarops_policy_last_compile_success_timestamp_seconds",
			Help: "Unix time of the last successful policy compile.",
		}),
		snapshotInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sidecarops_policy_snapshot_info",
			Help: "1 for the revision of the compiled bundle in the snapshot serving decisions.",
		}, []string{"revision"}),
		activations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidecarops_bundle_activations_total",
			Help: "Administrators' bundle activations by source and result (failure: refused by verification, unreadable, or not compiling).",
		}, []string{"source", "result"}),
		bundleInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sidecarops_bundle_info",
			Help: "1 for the manifest revision of each source's bundle in the snapshot serving decisions.",
		}, []string{"source", "revision"}),
		sourceErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidecarops_bundle_source_errors_total",
			Help: "Failures to read or reach a bundle source (file missing, server down); the last good bundle keeps serving.",
		}, []string{"source"}),
		sourceSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sidecarops_bundle_last_success_timestamp_seconds",
			Help: "Unix time a bundle source last answered in full (a bundle, or not modified); a source that stalls or fails stops moving it.",
		}, []string{"source"}),
		refused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sidecarops_bundle_refused",
			Help: "1 while the newest bundle of a source is refused (its last good bundle, if any, serving instead), 0 once one is accepted.",
		}, []string{"source"}),
		partial: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sidecarops_policy_partial_sidecarsets",
			Help: "SidecarSets whose rules the snapshot serving decisions compiled apart after a change (0 once folded into one compile, FoldAfter after changes stop).",
		}),
		refusedPolls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidecarops_bundle_refused_polls_total",
			Help: "Polls of a bundle source answered while its newest bundle stands refused: the poll that brought it, then each that found it unchanged (logged once, counted every time).",
		}, []string{"source"}),
	}
	var err error
	if m.compileDuration, err = promreg.Register(r, m.compileDuration); err != nil {
		return nil, err
	}
	if m.compiles, err = promreg.Register(r, m.compiles); err != nil {
		return nil, err
	}
	if m.lastSuccess, err = promreg.Register(r, m.lastSuccess); err != nil {
		return nil, err
	}
	if m.snapshotInfo, err = promreg.Register(r, m.snapshotInfo); err != nil {
		return nil, err
	}
	if m.activations, err = promreg.Register(r, m.activations); err != nil {
		return nil, err
	}
	if m.bundleInfo, err = promreg.Register(r, m.bundleInfo); err != nil {
		return nil, err
	}
	if m.sourceErrors, err = promreg.Register(r, m.sourceErrors); err != nil {
		return nil, err
	}
	if m.sourceSuccess, err = promreg.Register(r, m.sourceSuccess); err != nil {
		return nil, err
	}
	if m.refused, err = promreg.Register(r, m.refused); err != nil {
		return nil, err
	}
	if m.refusedPolls, err = promreg.Register(r, m.refusedPolls); err != nil {
		return nil, err
	}
	if m.partial, err = promreg.Register(r, m.partial); err != nil {
		return nil, err
	}
	for _, res := range []string{resultSuccess, resultFailure} {
		m.compiles.WithLabelValues(res)
	}
	return m, nil
}
