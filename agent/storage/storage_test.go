package storage

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidate(t *testing.T) {
	target := &Target{Group: "game.example.com", Version: "v1", Resource: "gameservers", Name: "${SELF:POD_NAME}", Namespace: "${SELF:POD_NAMESPACE}"}
	tests := []struct {
		name string
		c    Config
		errs []string
	}{
		{"annotation", Config{Type: TypeInKube, InKube: &InKubeConfig{AnnotationKey: "example.com/probe"}}, nil},
		{"target", Config{Type: TypeInKube, InKube: &InKubeConfig{Target: target, JSONPath: "/spec/opsState"}}, nil},
		{"markers only", Config{Type: TypeInKube, InKube: &InKubeConfig{MarkerPolicies: []MarkerPolicy{{State: "idle", Labels: map[string]string{"idle": "true"}}}}}, nil},
		{"type", Config{Type: "HTTPMetric"}, []string{`s.type: Unsupported value: "HTTPMetric": supported values: "InKube"`}},
		{"no inKube", Config{Type: TypeInKube}, []string{"s.inKube: Required value: type InKube needs inKube"}},
		{"nowhere to store", Config{Type: TypeInKube, InKube: &InKubeConfig{}}, []string{"s.inKube: Required value: one of annotationKey"}},
		{"bad keys", Config{Type: TypeInKube, InKube: &InKubeConfig{AnnotationKey: "a b", LabelKey: "-x", ConditionType: "x/y/z"}}, []string{
			`s.inKube.annotationKey: Invalid value: "a b"`, `s.inKube.labelKey: Invalid value: "-x"`, `s.inKube.conditionType: Invalid value: "x/y/z"`}},
		{"condition of an agent's own domain", Config{Type: TypeInKube, InKube: &InKubeConfig{ConditionType: "game.example.com/Probed"}}, nil},
		{"condition without a domain", Config{Type: TypeInKube, InKube: &InKubeConfig{ConditionType: "Ready"}}, []string{
			`s.inKube.conditionType: Invalid value: "Ready": must have a domain prefix`}},
		{"condition of Kubernetes' domain", Config{Type: TypeInKube, InKube: &InKubeConfig{ConditionType: "kubernetes.io/Probed"}}, []string{
			`s.inKube.conditionType: Invalid value: "kubernetes.io/Probed": must not be in the kubernetes.io domain`}},
		{"condition of a k8s.io subdomain", Config{Type: TypeInKube, InKube: &InKubeConfig{ConditionType: "scheduling.k8s.io/Probed"}}, []string{
			`s.inKube.conditionType: Invalid value: "scheduling.k8s.io/Probed": must not be in the k8s.io domain`}},
		{"target incomplete", Config{Type: TypeInKube, InKube: &InKubeConfig{Target: &Target{}, JSONPath: "spec.opsState"}}, []string{
			"s.inKube.target.version: Required value", "s.inKube.target.resource: Required value", "s.inKube.target.name: Required value",
			`s.inKube.jsonPath: Invalid value: "spec.opsState": must be a JSON pointer to a field, like /spec/opsState`}},
		{"jsonPath without target", Config{Type: TypeInKube, InKube: &InKubeConfig{AnnotationKey: "a", JSONPath: "/spec"}}, []string{
			"s.inKube.jsonPath: Forbidden: jsonPath needs a target"}},
		{"markers", Config{Type: TypeInKube, InKube: &InKubeConfig{MarkerPolicies: []MarkerPolicy{
			{State: "idle", Labels: map[string]string{"idle": "not a label value"}},
			{State: "idle"},
			{Annotations: map[string]string{"a b": "x"}},
		}}}, []string{
			`s.inKube.markerPolicies[0].labels[idle]: Invalid value: "not a label value"`,
			`s.inKube.markerPolicies[1].state: Duplicate value: "idle"`,
			"s.inKube.markerPolicies[2].state: Required value",
			`s.inKube.markerPolicies[2].annotations[a b]: Invalid value: "a b"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := tt.c.Validate(field.NewPath("s"))
			require.Len(t, errs, len(tt.errs), errs.ToAggregate())
			for i, e := range tt.errs {
				assert.Contains(t, errs[i].Error(), e)
			}
		})
	}
}

func TestParsePointer(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  bool
	}{
		{"/spec/opsState", []string{"spec", "opsState"}, false},
		{"/metadata/annotations/example.com~1probe", []string{"metadata", "annotations", "example.com/probe"}, false},
		{"/a~0b", []string{"a~b"}, false},
		{"", nil, true},
		{"/", nil, true},
		{"spec/opsState", nil, true},
		{"/spec//opsState", nil, true},
	}
	for _, tt := range tests {
		got, err := ParsePointer(tt.in)
		assert.Equal(t, tt.err, err != nil, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
}

func TestPodMetadataPatch(t *testing.T) {
	pod := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{
		"resourceVersion": "7",
		"labels":          map[string]any{"app": "game", "idle": "true"},
		"annotations":     map[string]any{"example.com/probe": "idle", "controller.kubernetes.io/pod-deletion-cost": "-10"},
	}}}
	in := &InKubeConfig{AnnotationKey: "example.com/probe", MarkerPolicies: []MarkerPolicy{
		{State: "idle", Labels: map[string]string{"idle": "true"}, Annotations: map[string]string{"controller.kubernetes.io/pod-deletion-cost": "-10"}},
		{State: "allocated", Labels: map[string]string{"idle": "false"}, Annotations: map[string]string{"controller.kubernetes.io/pod-deletion-cost": "10"}},
	}}
	assert.Nil(t, podMetadataPatch(pod, in, Record{Value: "idle", State: "idle"}), "nothing changes: no write")
	assert.Equal(t, map[string]any{"metadata": map[string]any{
		"resourceVersion": "7",
		"labels":          map[string]any{"idle": "false"},
		"annotations":     map[string]any{"example.com/probe": "allocated", "controller.kubernetes.io/pod-deletion-cost": "10"},
	}}, podMetadataPatch(pod, in, Record{Value: "allocated", State: "allocated"}))
	assert.Equal(t, map[string]any{"metadata": map[string]any{
		"resourceVersion": "7",
		"annotations":     map[string]any{"example.com/probe": "Failed"},
	}}, podMetadataPatch(pod, in, Record{Value: "Failed", State: "Failed"}), "a state without a policy leaves the markers")
	in.LabelKey = "probe"
	assert.Equal(t, map[string]any{"metadata": map[string]any{
		"resourceVersion": "7",
		"labels":          map[string]any{"probe": "idle"},
	}}, podMetadataPatch(pod, in, Record{Value: "idle", State: "idle"}))
}

func TestExpand(t *testing.T) {
	s := Self{PodName: "game-0", PodNamespace: "games"}
	assert.Equal(t, "games/game-0", s.Expand("${SELF:POD_NAMESPACE}/${SELF:POD_NAME}"))
	assert.Equal(t, "fixed", s.Expand("fixed"))
}
