package agent

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/internal/testing/doctable"
)

// docs/agent.md lists every metric the agent registers, with its labels, and nothing else.
func TestMetricsAreDocumented(t *testing.T) {
	doc, err := doctable.Doc("agent.md")
	require.NoError(t, err)
	documented, err := doctable.MetricsUnder(doc, "9. Metrics")
	require.NoError(t, err)

	registered := registeredMetrics(t)
	require.NotEmpty(t, registered)
	assert.Equal(t, registered, documented, "the agent's metrics (-) against docs/agent.md (+)")
}

// registeredMetrics are the metrics NewMetrics registers, by name, with their label names.
func registeredMetrics(t *testing.T) map[string][]string {
	t.Helper()
	// Every collector Metrics holds, read by reflection so that a field added later is not missed.
	m := reflect.ValueOf(NewMetrics(nil)).Elem()
	var collectors []prometheus.Collector
	for i := range m.NumField() {
		f := m.Field(i)
		if c, ok := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(prometheus.Collector); ok {
			collectors = append(collectors, c)
		}
	}
	registered, err := doctable.Described(collectors...)
	require.NoError(t, err)
	return registered
}
