package migrate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
)

func TestCovers(t *testing.T) {
	rule := func(ops []admissionregv1.OperationType, groups, resources []string) []admissionregv1.RuleWithOperations {
		return []admissionregv1.RuleWithOperations{{Operations: ops, Rule: admissionregv1.Rule{APIGroups: groups, Resources: resources}}}
	}
	create := []admissionregv1.OperationType{admissionregv1.Create}
	tests := []struct {
		name  string
		rules []admissionregv1.RuleWithOperations
		want  bool
	}{
		{"pods CREATE", rule(create, []string{""}, []string{"pods"}), true},
		{"every operation", rule([]admissionregv1.OperationType{admissionregv1.OperationAll}, []string{""}, []string{"pods"}), true},
		{"every group and resource", rule(create, []string{"*"}, []string{"*"}), true},
		{"UPDATE only", rule([]admissionregv1.OperationType{admissionregv1.Update}, []string{""}, []string{"pods"}), false},
		{"another resource", rule(create, []string{""}, []string{"services"}), false},
		{"another group", rule(create, []string{"apps"}, []string{"pods"}), false},
		{"a subresource only", rule(create, []string{""}, []string{"pods/status"}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, covers(tt.rules, "", "pods"))
		})
	}
}

func TestIsKruise(t *testing.T) {
	svc := func(name string) admissionregv1.WebhookClientConfig {
		return admissionregv1.WebhookClientConfig{Service: &admissionregv1.ServiceReference{Name: name}}
	}
	assert.True(t, isKruise("kruise-mutating-webhook-configuration", admissionregv1.WebhookClientConfig{}), "by the chart's name")
	assert.True(t, isKruise("renamed", svc(KruiseWebhookService)), "by the Service")
	assert.False(t, isKruise("istio-sidecar-injector", svc("istiod")), "another project's pod webhook is not ours to judge")
	assert.False(t, isKruise("by-url", admissionregv1.WebhookClientConfig{URL: new(string)}))
}
