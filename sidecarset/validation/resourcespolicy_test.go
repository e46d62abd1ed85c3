package validation

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// TestResourcesPolicy restates V48–V60 (compat §4.4), through the whole validation of a SidecarSet
// whose container carries the policy.
func TestResourcesPolicy(t *testing.T) {
	const p = "spec.containers[0].resourcesPolicy"
	policy := func(mode v1beta1.TargetContainersModeType, regex string, expr v1beta1.ResourcesExpr) func(ss *v1beta1.SidecarSet) {
		return func(ss *v1beta1.SidecarSet) {
			ss.Spec.Containers[0].ResourcesPolicy = &v1beta1.ResourcesPolicy{TargetContainersMode: mode, TargetContainersNameRegex: regex, ResourcesExpr: expr}
		}
	}
	limits := func(cpu, memory string) v1beta1.ResourcesExpr {
		return v1beta1.ResourcesExpr{Limits: &v1beta1.ResourceExprLimits{CPU: cpu, Memory: memory}}
	}
	requests := func(cpu, memory string) v1beta1.ResourcesExpr {
		return v1beta1.ResourcesExpr{Requests: &v1beta1.ResourceExprRequests{CPU: cpu, Memory: memory}}
	}
	const sum, most = v1beta1.TargetContainersModeSum, v1beta1.TargetContainersModeMax
	run(t, []validCase{
		{
			name: "V48 sum with limits and requests",
			mutate: policy(sum, "^app.*$", v1beta1.ResourcesExpr{
				Limits:   &v1beta1.ResourceExprLimits{CPU: "max(cpu*50%, 50m)", Memory: "max(memory*50%, 100Mi)"},
				Requests: &v1beta1.ResourceExprRequests{CPU: "max(cpu*50%, 50m)", Memory: "max(memory*50%, 100Mi)"},
			}),
			want: []want{},
		},
		{name: "V49 max with only a cpu limit", mutate: policy(most, "^app.*$", limits("cpu*50%", "")), want: []want{}},
		{name: "V50 only requests", mutate: policy(sum, ".*", requests("max(cpu*50%, 50m)", "100Mi")), want: []want{}},
		{
			// Raw: defaulting fills the regex with ".*" (the CRD default).
			name: "V51 empty regex (raw)",
			raw:  true,
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Containers = []v1beta1.SidecarContainer{rawSidecar("test-sidecar")}
				policy(sum, "", limits("cpu*50%", ""))(ss)
			},
			want:   []want{required(p + ".targetContainersNameRegex")},
			detail: "invalid empty regex",
		},
		{name: "V51 empty regex (defaulted to .*)", mutate: policy(sum, "", limits("cpu*50%", "")), want: []want{}},
		{
			name: "V52 policy and resources.limits",
			mutate: func(ss *v1beta1.SidecarSet) {
				policy(sum, "", limits("cpu*50%", ""))(ss)
				ss.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("100Mi")}
			},
			want:   []want{forbidden(p)},
			detail: "resourcesPolicy and resources cannot be configured together",
		},
		{
			// The conflict stops the policy checks: the bad expression is not reported.
			name: "V53 policy and resources.requests",
			mutate: func(ss *v1beta1.SidecarSet) {
				policy(sum, "", limits("cpu +*/ 50%", ""))(ss)
				ss.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}
			},
			want: []want{forbidden(p)},
		},
		{
			name:   "V54 invalid regex",
			mutate: policy(sum, "[invalid(regex", limits("cpu*50%", "")),
			want:   []want{invalid(p + ".targetContainersNameRegex")},
			detail: "invalid regex pattern",
		},
		{
			name:   "V55 neither limits nor requests",
			mutate: policy(sum, "^app.*$", v1beta1.ResourcesExpr{}),
			want:   []want{required(p + ".resourcesExpr")},
			detail: "at least one of limits or requests must be configured",
		},
		{
			name:   "V56 invalid cpu expression",
			mutate: policy(sum, "^app.*$", limits("invalid expression @#$", "")),
			want:   []want{invalid(p + ".resourcesExpr.limits.cpu")},
			detail: "invalid expression",
		},
		{name: "V57 unbalanced parenthesis", mutate: policy(sum, "^app.*$", limits("max(cpu*50%, 50m", "")), want: []want{invalid(p + ".resourcesExpr.limits.cpu")}},
		{name: "V58 max with one argument", mutate: policy(sum, "^app.*$", limits("max(cpu*50%)", "")), want: []want{invalid(p + ".resourcesExpr.limits.cpu")}},
		{name: "V59 unknown variable", mutate: policy(sum, "^app.*$", limits("invalidvar * 50%", "")), want: []want{invalid(p + ".resourcesExpr.limits.cpu")}},
		{
			name:   "V60 piecewise linear formula",
			mutate: policy(sum, "^app.*$", limits("0.5*cpu - 0.3*max(0, cpu-4) + 0.3*max(0, cpu-8)", "max(memory*50%, 100Mi)")),
			want:   []want{},
		},
		{name: "only a memory limit", mutate: policy(most, "^.*", limits("", "memory*50%")), want: []want{}},
		{name: "requests with only memory", mutate: policy(sum, "^.*", requests("", "100Mi")), want: []want{}},
		{name: "bad requests cpu", mutate: policy(sum, "^.*", requests("invalid_cpu_expr", "")), want: []want{invalid(p + ".resourcesExpr.requests.cpu")}},
		{name: "bad limits memory", mutate: policy(sum, "^.*", limits("", "bad_memory_expr")), want: []want{invalid(p + ".resourcesExpr.limits.memory")}},
		{name: "bad requests memory", mutate: policy(sum, "^.*", requests("", "bad_memory_expr")), want: []want{invalid(p + ".resourcesExpr.requests.memory")}},
		{
			name:   "mode missing",
			mutate: policy("", ".*", limits("cpu*50%", "")),
			want:   []want{required(p + ".targetContainersMode")},
		},
		{
			name: "native initContainer policy is checked too",
			mutate: func(ss *v1beta1.SidecarSet) {
				init := sidecar("init")
				init.RestartPolicy = &always
				init.ResourcesPolicy = &v1beta1.ResourcesPolicy{TargetContainersMode: sum, TargetContainersNameRegex: "(", ResourcesExpr: limits("cpu", "")}
				ss.Spec.InitContainers = []v1beta1.SidecarContainer{init}
			},
			want: []want{invalid("spec.initContainers[0].resourcesPolicy.targetContainersNameRegex")},
		},
	})
}

// TestExpressionPaths restates V61: the verdicts are package resourcespolicy's; this checks that each
// expression is validated with the right variable and reported at its own path.
func TestExpressionPaths(t *testing.T) {
	cases := []struct {
		expr, variable string
		valid          bool
	}{
		{"cpu*50%", "cpu", true},
		{"max(cpu*50%, 50m)", "cpu", true},
		{"min(cpu*50%, 100m)", "cpu", true},
		{"0.5*cpu - 0.3*max(0, cpu-4) + 0.3*max(0, cpu-8)", "cpu", true},
		{"max( cpu * 0.5 , 50m )", "cpu", true},
		{"memory*50%", "memory", true},
		{"max(min(cpu*50%, 100m), 50m)", "cpu", true},
		{"", "cpu", true},
		{"invalidvar * 50%", "cpu", false},
		{"cpu +*/ 50%", "cpu", false},
		{"memory*50%", "cpu", false},
	}
	for _, tc := range cases {
		path := field.NewPath("x")
		errs := validateExpr(tc.expr, tc.variable, path)
		if tc.valid {
			assert.Empty(t, errs, "%q", tc.expr)
			continue
		}
		if assert.Len(t, errs, 1, "%q", tc.expr) {
			assert.Equal(t, "x", errs[0].Field)
			assert.Contains(t, errs[0].Detail, "invalid expression: ")
		}
	}
}
