package manifest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

func TestWhitelist(t *testing.T) {
	cm := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: v1beta1.KruiseConfigurationName, Namespace: "kruise-system"}, Data: data}
	}
	value := func(v string) *corev1.ConfigMap {
		return cm(map[string]string{v1beta1.PatchPodMetadataWhiteListKey: v})
	}
	tests := []struct {
		name            string
		cm              *corev1.ConfigMap
		defaultsAllowed bool
		want            string // data.whitelist as JSON
		errs            []string
	}{
		{name: "no ConfigMap: rules absent (whitelist not found)", cm: nil, want: `{"defaultsAllowed": false}`},
		{name: "the feature gate is carried", cm: nil, defaultsAllowed: true, want: `{"defaultsAllowed": true}`},
		{name: "ConfigMap without the key", cm: cm(map[string]string{"other": "x"}), want: `{"defaultsAllowed": false}`},
		{name: "no rules: a whitelist that allows nothing", cm: value(`{}`), want: `{"defaultsAllowed": false, "rules": []}`},
		{name: "null rules", cm: value(`{"rules": null}`), want: `{"defaultsAllowed": false, "rules": []}`},
		{
			name: "rules with and without selector, in order",
			cm: value(`{"rules": [
				{"selector": {"matchLabels": {"app": "sidecar"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]},
				 "allowedAnnotationKeyExprs": ["key.*", "^example\\.com/"]},
				{"allowedAnnotationKeyExprs": ["other"]},
				{"selector": {}}
			]}`),
			want: `{"defaultsAllowed": false, "rules": [
				{"selector": {"matchLabels": {"app": "sidecar"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]},
				 "allowedAnnotationKeyExprs": ["key.*", "^example\\.com/"]},
				{"allowedAnnotationKeyExprs": ["other"]},
				{"selector": {}}
			]}`,
		},
		{
			name: "invalid regular expressions and operators are the policies' to judge",
			cm:   value(`{"rules": [{"selector": {"matchExpressions": [{"key": "k", "operator": "Near"}]}, "allowedAnnotationKeyExprs": ["("]}]}`),
			want: `{"defaultsAllowed": false, "rules": [{"selector": {"matchExpressions": [{"key": "k", "operator": "Near"}]}, "allowedAnnotationKeyExprs": ["("]}]}`,
		},
		{
			name: "unknown and duplicate fields",
			cm:   value(`{"rules": [{"allowedAnnotationKeyExpr": ["k"], "selector": {}, "selector": {}}], "rulez": []}`),
			errs: []string{
				"ConfigMap/kruise-configuration: data[SidecarSet_PatchPodMetadata_WhiteList].rules[0].allowedAnnotationKeyExpr: unknown field",
				"ConfigMap/kruise-configuration: data[SidecarSet_PatchPodMetadata_WhiteList].rules[0].selector: duplicate field",
				"ConfigMap/kruise-configuration: data[SidecarSet_PatchPodMetadata_WhiteList].rulez: unknown field",
			},
		},
		{
			name: "wrong types",
			cm:   value(`{"rules": [{"allowedAnnotationKeyExprs": "key.*"}, {"selector": {"matchLabels": {"a": 1}}}]}`),
			errs: []string{
				"ConfigMap/kruise-configuration: data[SidecarSet_PatchPodMetadata_WhiteList].rules[0].allowedAnnotationKeyExprs: expected array, got string",
				"ConfigMap/kruise-configuration: data[SidecarSet_PatchPodMetadata_WhiteList].rules[1].selector.matchLabels.a: expected string, got 1",
			},
		},
		{
			name: "invalid JSON, with its line",
			cm:   value("{\"rules\": [\n  {\"allowedAnnotationKeyExprs\": [\"a\",]}\n]}"),
			errs: []string{"ConfigMap/kruise-configuration: data[SidecarSet_PatchPodMetadata_WhiteList]: invalid JSON: line 2 of the value: invalid character ']' looking for beginning of value"},
		},
		{
			name: "empty value",
			cm:   value(""),
			errs: []string{"ConfigMap/kruise-configuration: data[SidecarSet_PatchPodMetadata_WhiteList]: expected a JSON object, got nothing"},
		},
		{
			name: "not an object",
			cm:   value(`[{"allowedAnnotationKeyExprs": ["a"]}]`),
			errs: []string{"ConfigMap/kruise-configuration: data[SidecarSet_PatchPodMetadata_WhiteList]: expected a JSON object, got array"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Whitelist(tt.cm, tt.defaultsAllowed)
			assert.Equal(t, tt.errs, errorLines(t, err))
			if tt.errs != nil {
				assert.Nil(t, got)
				return
			}
			gotJSON, err := json.Marshal(got)
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(gotJSON))
		})
	}
}

// The whitelist of a ConfigMap read from a file: the value is a YAML string holding JSON.
func TestWhitelistFromManifest(t *testing.T) {
	objs := kindsFixture(t)
	cm, ok := objs[3].Obj.(*corev1.ConfigMap)
	require.True(t, ok)
	got, err := Whitelist(cm, false)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"defaultsAllowed": false,
		"rules":           []any{map[string]any{"allowedAnnotationKeyExprs": []any{`^example\.com/.*`}}},
	}, got)
}
