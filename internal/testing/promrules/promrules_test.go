package promrules

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDashboardQueries(t *testing.T) {
	q, err := DashboardQueries([]byte(`{"panels": [{"title": "a", "targets": [{"expr": "x"}]},
		{"title": "row", "type": "row", "panels": [{"title": "b", "targets": [{"expr": "y"}, {"expr": "z"}]}]}]}`))
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"a": {"x"}, "b": {"y", "z"}}, q)
	_, err = DashboardQueries([]byte(`{"panels": [}`))
	assert.Error(t, err)
}
