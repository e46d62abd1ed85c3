package agent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseConfig(t *testing.T) {
	reg := registry(&journal{}, "http_probe", "hot_update")
	tests := []struct {
		name string
		yaml string
		errs []string // whole lines of the error
	}{
		{"seed spelling", `
plugins:
  - name: http_probe
    config: {tag: x}
    bootorder: 1
  - name: hot_update
restartpolicy: Never
resources: {CPU: 100m, Memory: 128Mi}
sidecarstartorder: After
`, nil},
		{"defaults", "plugins: []", nil},
		{"unknown plugin", "plugins: [{name: dns_probe}]", []string{
			`agent.yaml: plugin dns_probe: plugins[0].name: Unsupported value: "dns_probe": supported values: "hot_update", "http_probe"`}},
		{"no name", "plugins: [{config: {}}]", []string{"agent.yaml: plugins[0].name: Required value"}},
		{"duplicate", "plugins: [{name: http_probe}, {name: http_probe}]", []string{
			`agent.yaml: plugin http_probe: plugins[1].name: Duplicate value: "http_probe"`}},
		{"unknown plugin field", "plugins: [{name: hot_update, config: {tga: x}}]", []string{
			`agent.yaml: plugin hot_update: plugins[0].config: Invalid value: "{\"tga\":\"x\"}": json: unknown field "tga"`}},
		{"plugin validation", "plugins: [{name: hot_update, config: {failStarts: -1}}]", []string{
			"agent.yaml: plugin hot_update: plugins[0].config.failStarts: Invalid value: -1: must not be negative"}},
		{"top level", "restartPolicy: OnFailure\nsidecarStartOrder: Later\nresources: {CPU: lots}\nplugins: []", []string{
			`agent.yaml: restartPolicy: Unsupported value: "OnFailure": supported values: "Always", "Never"`,
			`agent.yaml: sidecarStartOrder: Unsupported value: "Later": supported values: "Before", "After"`,
			`agent.yaml: resources.CPU: Invalid value: "lots": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`,
		}},
		{"unknown top-level field", "plugin: []", []string{`agent.yaml: error unmarshaling JSON: while decoding JSON: json: unknown field "plugin"`}},
		{"not YAML", "plugins: [", []string{"agent.yaml: error converting YAML to JSON: yaml: line 1: did not find expected node content"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig("agent.yaml", []byte(tt.yaml), reg)
			if tt.errs == nil {
				require.NoError(t, err)
				require.NotNil(t, c)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tt.errs, strings.Split(err.Error(), "\n"))
		})
	}
}

func TestParseConfigValues(t *testing.T) {
	reg := registry(&journal{}, "http_probe", "hot_update")
	c, err := ParseConfig("agent.yaml", []byte(`
plugins:
  - {name: http_probe, bootOrder: 1, config: {tag: probe}}
  - {name: hot_update}
resources: {CPU: 100m, Memory: 128Mi}
`), reg)
	require.NoError(t, err)
	assert.Equal(t, RestartAlways, c.RestartPolicy)
	assert.Equal(t, "Before", c.SidecarStartOrder)
	assert.Equal(t, Resources{CPU: "100m", Memory: "128Mi"}, c.Resources)
	require.Len(t, c.Plugins, 2)
	assert.Equal(t, "hot_update", c.Plugins[0].Name, "sorted by bootOrder")
	assert.Equal(t, &testConfig{Tag: "probe"}, c.Plugins[1].decoded)
	assert.Equal(t, &testConfig{}, c.Plugins[0].decoded)
}
