package coexist

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
)

func rules(group string, resources ...string) []admissionregv1.RuleWithOperations {
	return []admissionregv1.RuleWithOperations{{Rule: admissionregv1.Rule{APIGroups: []string{group}, Resources: resources}}}
}

func TestIsSidecarSetWebhook(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules []admissionregv1.RuleWithOperations
		want  bool
	}{
		{"OpenKruise's msidecarset.kb.io and vsidecarset.kb.io", rules("apps.kruise.io", "sidecarsets"), true},
		{"with the status subresource", rules("apps.kruise.io", "sidecarsets", "sidecarsets/status"), true},
		{"its pod webhook", rules("", "pods"), false},
		{"another kind of its group", rules("apps.kruise.io", "clonesets"), false},
		{"SidecarSets and another kind in one webhook", rules("apps.kruise.io", "sidecarsets", "clonesets"), false},
		{"every resource", rules("apps.kruise.io", "*"), false},
		{"every group", rules("*", "sidecarsets"), false},
		{"no rule", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, isSidecarSetWebhook(tc.rules))
		})
	}
}

func TestWithoutSidecarSets(t *testing.T) {
	of := func(w admissionregv1.ValidatingWebhook) (string, []admissionregv1.RuleWithOperations) {
		return w.Name, w.Rules
	}
	hooks := []admissionregv1.ValidatingWebhook{
		{Name: "vpod.kb.io", Rules: rules("", "pods")},
		{Name: "vsidecarset.kb.io", Rules: rules("apps.kruise.io", "sidecarsets")},
		{Name: "vcloneset.kb.io", Rules: rules("apps.kruise.io", "clonesets")},
	}
	kept, removed := withoutSidecarSets(hooks, of)
	assert.Equal(t, []string{"vsidecarset.kb.io"}, removed)
	require.Len(t, kept, 2)
	assert.Equal(t, "vpod.kb.io", kept[0].Name)
	assert.Equal(t, "vcloneset.kb.io", kept[1].Name)
	assert.Len(t, hooks, 3, "the configuration's list is not changed in place")

	// The template keeps each other webhook as the JSON it was, fields this client does not know
	// included; a template without SidecarSet webhooks, or one that does not parse, is left alone.
	template := `[{"name":"vpod.kb.io","rules":[{"apiGroups":[""],"resources":["pods"]}],"futureField":{"x":1}},` +
		`{"name":"vsidecarset.kb.io","rules":[{"apiGroups":["apps.kruise.io"],"resources":["sidecarsets"]}]}]`
	ann := map[string]string{TemplateAnnotation: template}
	removed, err := stripTemplate(ann, nil, of)
	require.NoError(t, err)
	assert.Equal(t, []string{"vsidecarset.kb.io"}, removed)
	var left []map[string]any
	require.NoError(t, json.Unmarshal([]byte(ann[TemplateAnnotation]), &left))
	require.Len(t, left, 1)
	assert.Equal(t, "vpod.kb.io", left[0]["name"])
	assert.Equal(t, map[string]any{"x": float64(1)}, left[0]["futureField"])

	for _, unchanged := range []string{`[{"name":"vpod.kb.io","rules":[{"apiGroups":[""],"resources":["pods"]}]}]`, `not json`} {
		ann := map[string]string{TemplateAnnotation: unchanged}
		removed, err := stripTemplate(ann, []string{"already"}, of)
		require.NoError(t, err)
		assert.Equal(t, []string{"already"}, removed)
		assert.Equal(t, unchanged, ann[TemplateAnnotation])
	}
}
