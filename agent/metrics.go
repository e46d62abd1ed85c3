package agent

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the agent's Prometheus collectors, served on /metrics.
type Metrics struct {
	Registry  *prometheus.Registry
	up        *prometheus.GaugeVec
	failures  *prometheus.CounterVec
	restarts  *prometheus.CounterVec
	stores    *prometheus.CounterVec
	reloads   *prometheus.CounterVec
	api       *prometheus.CounterVec
	throttled *prometheus.CounterVec
	refused   *prometheus.CounterVec
}

// NewMetrics registers the agent's collectors on reg, or on a new registry when reg is nil (each
// agent in a test process gets its own).
func NewMetrics(reg *prometheus.Registry) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{
		Registry: reg,
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sidecar_agent_plugin_up",
			Help: "1 while the plugin runs, 0 while it is failed, restarting or stopped."}, []string{"plugin"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sidecar_agent_plugin_failures_total",
			Help: "Plugin start failures and failures reported while running."}, []string{"plugin"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sidecar_agent_plugin_restarts_total",
			Help: "Restarts of failed plugins under restartPolicy Always."}, []string{"plugin"}),
		stores: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sidecar_agent_store_total",
			Help: "Results stored by plugins: written, unchanged (no API write) or error."}, []string{"plugin", "result"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sidecar_agent_config_reloads_total",
			Help: "config.yaml changes seen: applied or rejected (the previous configuration keeps running)."}, []string{"result"}),
		api: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sidecar_agent_api_requests_total",
			Help: "Requests to the agent's API but /healthz: allowed, unauthenticated (401), forbidden (403), throttled (429: too many new tokens to review) or error (503: no answer from the API server)."}, []string{"result"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sidecar_agent_auth_throttled_total",
			Help: "API requests refused (429) without a review of their new token, by the allowance spent: source (the caller's address) or global."}, []string{"reason"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sidecar_agent_plugin_refused_total",
			Help: "Requests, downloads and stored records a plugin refused, by the plugin's reason."}, []string{"plugin", "reason"}),
	}
	reg.MustRegister(m.up, m.failures, m.restarts, m.stores, m.reloads, m.api, m.throttled, m.refused)
	return m
}
