package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sidecarops/sidecarops/internal/promreg"
)

// What a round that planned upgrades read, the values of the rollout rounds counter's
// "planned_from" label.
const (
	plannedFromKeptCounts = "kept_counts" // the pods left to upgrade, with the counts kept from pod events
	plannedFromEveryPod   = "every_pod"   // every managed pod
)

// Metrics are the controller's metrics. A nil *Metrics records nothing.
type Metrics struct {
	conflictsDetected  prometheus.Counter
	inConflict         prometheus.Gauge
	recountDifferences prometheus.Counter
	rolloutRounds      *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them on reg (nil: controller-runtime's
// metrics.Registry, which the manager serves). Calling it again with the same registry returns
// metrics backed by the collectors already registered, so controllers built twice share one series.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		reg = metrics.Registry
	}
	conflictsDetected, err := promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sidecarops_controller_conflicts_detected_total",
		Help: "Times a SidecarSet was found colliding with other SidecarSets (or with others than before) after admission: its Conflict condition turned True.",
	}))
	if err != nil {
		return nil, err
	}
	inConflict, err := promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sidecarops_controller_sidecarsets_in_conflict",
		Help: "SidecarSets whose Conflict condition is True.",
	}))
	if err != nil {
		return nil, err
	}
	recountDifferences, err := promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sidecarops_controller_status_recount_differences_total",
		Help: "Periodic counts of a SidecarSet's pods that differed from the status counts kept from pod events (the count wins); any is a bug.",
	}))
	if err != nil {
		return nil, err
	}
	rolloutRounds, err := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sidecarops_controller_rollout_rounds_total",
		Help: "SidecarSet controller rounds that planned in-place upgrades, by what they read: kept_counts (the pods left to upgrade) or every_pod.",
	}, []string{"planned_from"}))
	if err != nil {
		return nil, err
	}
	// Every series exists from the start, so rate() and absence alerts work before the first event.
	for _, from := range []string{plannedFromKeptCounts, plannedFromEveryPod} {
		rolloutRounds.WithLabelValues(from)
	}
	return &Metrics{conflictsDetected: conflictsDetected, inConflict: inConflict, recountDifferences: recountDifferences, rolloutRounds: rolloutRounds}, nil
}

func (m *Metrics) conflictDetected() {
	if m == nil {
		return
	}
	m.conflictsDetected.Inc()
}

func (m *Metrics) setInConflict(n int) {
	if m == nil {
		return
	}
	m.inConflict.Set(float64(n))
}

func (m *Metrics) recountDiffered(pods int) {
	if m == nil {
		return
	}
	m.recountDifferences.Add(float64(pods))
}

// roundPlanned counts a round that planned upgrades from what plannedFrom says.
func (m *Metrics) roundPlanned(plannedFrom string) {
	if m == nil {
		return
	}
	m.rolloutRounds.WithLabelValues(plannedFrom).Inc()
}
