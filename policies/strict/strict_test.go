package strict

import (
	"testing"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/bundles"
)

// The embedded bundle is the directory as an administrator's copy of it reads: the same roots,
// modules and data, the tests left out.
func TestBundleIsTheDirectory(t *testing.T) {
	embedded, err := Bundle()
	require.NoError(t, err)
	dir, err := bundles.Read(".", nil)
	require.NoError(t, err)
	assert.Equal(t, *dir.Manifest.Roots, *embedded.Manifest.Roots)
	assert.Equal(t, []string{Root}, *embedded.Manifest.Roots)
	assert.Equal(t, dir.Data, embedded.Data)
	require.Len(t, embedded.Modules, len(dir.Modules))
	for i, m := range embedded.Modules {
		assert.Equal(t, string(dir.Modules[i].Raw), string(m.Raw))
		assert.Equal(t, "data.sidecarsets.strict", m.Parsed.Package.Path.String())
	}
	again, err := Bundle()
	require.NoError(t, err)
	assert.Same(t, embedded, again, "read once")
}

func TestRules(t *testing.T) {
	embedded, err := Bundle()
	require.NoError(t, err)
	assert.Equal(t, []string{"ignored-strategy-field", "max-unavailable", "selector-matches-nothing", "unchecked-strategy", "update-strategy-type"}, Rules(embedded))
	for _, tc := range []struct {
		name string
		data map[string]any
		want []string
	}{
		{"no data", nil, nil},
		{"other roots' data", map[string]any{"gates": map[string]any{"x": 1}}, nil},
		{"actions of the wrong shape", map[string]any{"sidecarsets": map[string]any{"strict": map[string]any{"actions": []any{"x"}}}}, nil},
		{"an administrator's own rule", map[string]any{"sidecarsets": map[string]any{"strict": map[string]any{"actions": map[string]any{"b": "warn", "a": "off"}}}}, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Rules(&bundle.Bundle{Data: tc.data}))
		})
	}
}
