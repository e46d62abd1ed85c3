package resourcespolicy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// ---- fixtures ----

func rl(cpu, mem string) corev1.ResourceList {
	l := corev1.ResourceList{}
	if cpu != "" {
		l[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		l[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	if len(l) == 0 {
		return nil
	}
	return l
}

func ctr(name, limCPU, limMem, reqCPU, reqMem string) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{
		Limits: rl(limCPU, limMem), Requests: rl(reqCPU, reqMem),
	}}
}

func podWith(cs ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: cs}}
}

type exprs struct{ limCPU, limMem, reqCPU, reqMem string }

func sidecar(mode v1beta1.TargetContainersModeType, regex string, e exprs) *v1beta1.SidecarContainer {
	return &v1beta1.SidecarContainer{
		Container: corev1.Container{Name: "sidecar"},
		ResourcesPolicy: &v1beta1.ResourcesPolicy{
			TargetContainersMode:      mode,
			TargetContainersNameRegex: regex,
			ResourcesExpr: v1beta1.ResourcesExpr{
				Limits:   &v1beta1.ResourceExprLimits{CPU: e.limCPU, Memory: e.limMem},
				Requests: &v1beta1.ResourceExprRequests{CPU: e.reqCPU, Memory: e.reqMem},
			},
		},
	}
}

// want is the expected ResourceRequirements as strings; "" = absent.
type want struct{ limCPU, limMem, reqCPU, reqMem string }

func assertResources(t *testing.T, w want, got corev1.ResourceRequirements) {
	t.Helper()
	check := func(what string, l corev1.ResourceList, name corev1.ResourceName, exp string) {
		t.Helper()
		q, ok := l[name]
		if exp == "" {
			assert.False(t, ok, "%s should be absent, got %s", what, q.String())
			return
		}
		if assert.True(t, ok, "%s missing", what) {
			assert.Equal(t, 0, q.Cmp(resource.MustParse(exp)), "%s: got %s, want %s", what, q.String(), exp)
			assert.Equal(t, exp, q.String(), "%s canonical form", what)
		}
	}
	check("limits.cpu", got.Limits, corev1.ResourceCPU, w.limCPU)
	check("limits.memory", got.Limits, corev1.ResourceMemory, w.limMem)
	check("requests.cpu", got.Requests, corev1.ResourceCPU, w.reqCPU)
	check("requests.memory", got.Requests, corev1.ResourceMemory, w.reqMem)
	if w.limCPU == "" && w.limMem == "" {
		assert.Nil(t, got.Limits, "limits should be nil when nothing is set")
	}
	if w.reqCPU == "" && w.reqMem == "" {
		assert.Nil(t, got.Requests, "requests should be nil when nothing is set")
	}
}

// The R1 numbers: app1 200m/200Mi limits, 50m/100Mi requests; app2 double.
var (
	app1 = ctr("app1", "200m", "200Mi", "50m", "100Mi")
	app2 = ctr("app2", "400m", "400Mi", "100m", "200Mi")
)

// ---- Compute: R1–R8, R11 ----

func TestCompute(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	native := func(c corev1.Container) corev1.Container { c.RestartPolicy = &always; return c }

	tests := []struct {
		id      string
		pod     *corev1.Pod
		sc      *v1beta1.SidecarContainer
		exclude map[string]bool
		want    want
		wantErr string
	}{
		{
			id:   "R1 sum, percentages and constants",
			pod:  podWith(app1, app2),
			sc:   sidecar("sum", ".*", exprs{"cpu*50%", "200Mi", "cpu*50%", "100Mi"}),
			want: want{"300m", "200Mi", "75m", "100Mi"},
		},
		{
			id: "R2 max with regex and max()",
			pod: podWith(
				ctr("large.engine.v4", "200m", "200Mi", "50m", "100Mi"),
				ctr("large.engine.v8", "400m", "400Mi", "100m", "200Mi"),
				ctr("other", "4", "4Gi", "2", "2Gi")),
			sc:   sidecar("max", `^large.engine.v.*$`, exprs{"max(cpu*50%, 50m)", "200Mi", "max(cpu*50%, 50m)", "100Mi"}),
			want: want{"200m", "200Mi", "50m", "100Mi"},
		},
		{
			id: "R3 sum over a single matching container",
			pod: podWith(
				ctr("large.engine.v4", "200m", "200Mi", "50m", "100Mi"),
				ctr("large.engine.v8", "400m", "400Mi", "100m", "200Mi")),
			sc:   sidecar("sum", `^large.engine.v4$`, exprs{"max(cpu*50%, 50m)", "200Mi", "max(cpu*50%, 50m)", "100Mi"}),
			want: want{"100m", "200Mi", "50m", "100Mi"},
		},
		{
			id:      "R4 nothing matches the regex",
			pod:     podWith(app1, app2),
			sc:      sidecar("sum", `^nonexistent$`, exprs{"cpu*50%", "", "", ""}),
			wantErr: `no containers match the regex pattern "^nonexistent$"`,
		},
		{
			id:   "R5 sum, one target without cpu limit",
			pod:  podWith(app1, ctr("app2", "", "400Mi", "100m", "200Mi")),
			sc:   sidecar("sum", ".*", exprs{"cpu*30%", "memory*30%", "cpu*30%", "memory*20%"}),
			want: want{"", "180Mi", "45m", "60Mi"},
		},
		{
			id:   "R6 max, one target without memory limit or request",
			pod:  podWith(ctr("app1", "200m", "200Mi", "100m", "100Mi"), ctr("app2", "400m", "", "200m", "")),
			sc:   sidecar("max", ".*", exprs{"cpu*40%", "memory*30%", "cpu*25%", "memory*20%"}),
			want: want{"160m", "", "50m", "20Mi"},
		},
		{
			id:   "R7 sum, one target without requests",
			pod:  podWith(ctr("app1", "200m", "200Mi", "100m", "100Mi"), ctr("app2", "400m", "400Mi", "", "")),
			sc:   sidecar("sum", ".*", exprs{"cpu*50%", "memory*30%", "cpu*30%", "memory*20%"}),
			want: want{"300m", "180Mi", "30m", "20Mi"},
		},
		{
			id: "R8 native sidecar init counts, plain init does not",
			pod: &corev1.Pod{Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{
					native(ctr("app1", "400m", "800Mi", "200m", "400Mi")),
					ctr("app2", "8", "8Gi", "8", "8Gi"),
				},
				Containers: []corev1.Container{ctr("app2", "600m", "1200Mi", "300m", "600Mi")},
			}},
			sc:   sidecar("sum", `^app.*$`, exprs{"max(cpu*30%, 50m)", "max(memory*25%, 100Mi)", "cpu*20%", "memory*15%"}),
			want: want{"300m", "500Mi", "100m", "150Mi"},
		},
		{
			id: "R11 targets exclude other sidecars and plain inits",
			pod: &corev1.Pod{Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{
					native(ctr("init-sidecar1", "1", "1Gi", "1", "1Gi")),
					ctr("plain-init-container", "1", "1Gi", "1", "1Gi"),
					native(ctr("sidecar-container", "100m", "100Mi", "10m", "10Mi")),
				},
				Containers: []corev1.Container{
					ctr("app1", "200m", "200Mi", "20m", "20Mi"),
					ctr("app2", "300m", "300Mi", "30m", "30Mi"),
					ctr("sidecar1", "1", "1Gi", "1", "1Gi"),
				},
			}},
			exclude: map[string]bool{"init-sidecar1": true, "sidecar1": true},
			sc:      sidecar("sum", `^.*$`, exprs{"cpu", "memory", "cpu", "memory"}),
			want:    want{"600m", "600Mi", "60m", "60Mi"}, // exactly sidecar-container + app1 + app2
		},
		{
			id:   "empty expressions: limit unlimited, request not set",
			pod:  podWith(app1),
			sc:   sidecar("sum", ".*", exprs{"", "", "", ""}),
			want: want{},
		},
		{
			id:   "a constant limit is still dropped when a target is unlimited (OpenKruise)",
			pod:  podWith(app1, ctr("app2", "", "", "", "")),
			sc:   sidecar("sum", ".*", exprs{"500m", "1Gi", "500m", "1Gi"}),
			want: want{"", "", "500m", "1Gi"},
		},
		{
			id:   "request over zero aggregate is set to 0",
			pod:  podWith(ctr("app", "1", "1Gi", "", "")),
			sc:   sidecar("sum", ".*", exprs{"", "", "cpu*50%", "memory*50%"}),
			want: want{"", "", "0", "0"},
		},
		{
			id:   "empty regex matches everything",
			pod:  podWith(app1, app2),
			sc:   sidecar("max", "", exprs{"cpu", "memory", "", ""}),
			want: want{"400m", "400Mi", "", ""},
		},
		{
			id:      "invalid regex",
			pod:     podWith(app1),
			sc:      sidecar("sum", "[invalid(regex", exprs{"cpu", "", "", ""}),
			wantErr: `invalid regex pattern "[invalid(regex"`,
		},
		{
			id:      "unknown mode",
			pod:     podWith(app1),
			sc:      sidecar("avg", ".*", exprs{"cpu", "", "", ""}),
			wantErr: `unsupported targetContainersMode "avg"`,
		},
		{
			id:      "expression error names field and expression",
			pod:     podWith(app1),
			sc:      sidecar("sum", ".*", exprs{"cpu*cpu", "", "", ""}),
			wantErr: `container "sidecar" resourcesPolicy: limits.cpu: expression "cpu*cpu": cannot multiply two quantities`,
		},
		{
			id:      "negative result is refused",
			pod:     podWith(app1),
			sc:      sidecar("sum", ".*", exprs{"", "", "cpu - 1", ""}),
			wantErr: `requests.cpu: expression "cpu - 1": result -0.950 is negative`,
		},
		{
			id:      "the other resource's variable is undefined",
			pod:     podWith(app1),
			sc:      sidecar("sum", ".*", exprs{"memory*50%", "", "", ""}),
			wantErr: `undefined variable "memory"`,
		},
		{
			id:      "nil pod",
			sc:      sidecar("sum", ".*", exprs{"cpu", "", "", ""}),
			wantErr: "pod is nil",
		},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			got, err := Compute(tc.pod, tc.sc, tc.exclude)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assertResources(t, tc.want, got)
		})
	}
}

func TestComputeWithoutPolicyReturnsOwnResources(t *testing.T) {
	sc := &v1beta1.SidecarContainer{Container: ctr("s", "1", "1Gi", "", "")}
	got, err := Compute(podWith(app1), sc, nil)
	require.NoError(t, err)
	assertResources(t, want{"1", "1Gi", "", ""}, got)
	got.Limits[corev1.ResourceCPU] = resource.MustParse("2")
	assert.Equal(t, "1", sc.Resources.Limits.Cpu().String(), "returned a copy")

	_, err = Compute(podWith(app1), nil, nil)
	assert.Error(t, err)
}

func TestComputeDoesNotModifyInputs(t *testing.T) {
	pod := podWith(app1, app2)
	before := pod.DeepCopy()
	sc := sidecar("sum", ".*", exprs{"cpu*50%", "memory", "cpu", "memory"})
	scBefore := sc.DeepCopy()
	_, err := Compute(pod, sc, nil)
	require.NoError(t, err)
	assert.Equal(t, before, pod)
	assert.Equal(t, scBefore, sc)
}

// ---- aggregation: R9, R10 ----

func TestAggregate(t *testing.T) {
	noCPULimit := ctr("x", "", "400Mi", "100m", "200Mi")
	noMemLimit := ctr("x", "400m", "", "100m", "200Mi")
	noRequests := ctr("x", "400m", "400Mi", "", "")
	tests := []struct {
		id   string
		mode v1beta1.TargetContainersModeType
		cs   []corev1.Container
		want want
	}{
		{"R9 sum", "sum", []corev1.Container{app1, app2}, want{"600m", "600Mi", "150m", "300Mi"}},
		{"R9 sum, one lacks cpu limit", "sum", []corev1.Container{app1, noCPULimit}, want{"", "600Mi", "150m", "300Mi"}},
		{"R9 sum, one lacks requests", "sum", []corev1.Container{app1, noRequests}, want{"600m", "600Mi", "50m", "100Mi"}},
		{"R10 max", "max", []corev1.Container{app1, app2}, want{"400m", "400Mi", "100m", "200Mi"}},
		{"R10 max, one lacks memory limit", "max", []corev1.Container{app1, noMemLimit}, want{"400m", "", "100m", "200Mi"}},
		{"R10 max, one lacks requests", "max", []corev1.Container{app1, noRequests}, want{"400m", "400Mi", "50m", "100Mi"}},
		{"sum of zero requests is absent", "sum", []corev1.Container{noRequests}, want{"400m", "400Mi", "", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			var ptrs []*corev1.Container
			for i := range tc.cs {
				ptrs = append(ptrs, &tc.cs[i])
			}
			lim, req, err := aggregate(ptrs, tc.mode)
			require.NoError(t, err)
			got := corev1.ResourceRequirements{Limits: lim, Requests: req}
			if len(lim) == 0 {
				got.Limits = nil
			}
			if len(req) == 0 {
				got.Requests = nil
			}
			assertResources(t, tc.want, got)
		})
	}
}

// ---- evaluation: R12 ----

// evalField evaluates like Compute does for one field: empty limit = unlimited (nil), empty
// request = 0.
func evalField(expr, variable, agg string, isLimit bool) (*resource.Quantity, error) {
	if expr == "" {
		if isLimit {
			return nil, nil
		}
		return resource.NewQuantity(0, resource.DecimalSI), nil
	}
	e, err := Parse(expr, variable)
	if err != nil {
		return nil, err
	}
	q, err := e.Eval(resource.MustParse(agg))
	if err != nil {
		return nil, err
	}
	return &q, nil
}

func TestEvalR12(t *testing.T) {
	tests := []struct {
		expr, variable, agg string
		isLimit             bool
		want                string // "nil" = unlimited
		wantErr             bool
	}{
		{"", "cpu", "100m", true, "nil", false},
		{"", "cpu", "100m", false, "0", false},
		{"cpu*50%", "cpu", "200m", true, "100m", false},
		{"memory*30%", "memory", "600Mi", true, "180Mi", false},
		{"max(cpu*50%,100m)", "cpu", "150m", true, "100m", false},
		{"max(cpu*50%,100m)", "cpu", "400m", true, "200m", false},
		{"cpu + 50m", "cpu", "100m", true, "150m", false},
		{"max(memory*20% + 100Mi, 200Mi)", "memory", "800Mi", true, "260Mi", false},
		{"500m", "cpu", "1", true, "500m", false},
		{"1Gi", "memory", "1", true, "1Gi", false},
		{"cpu * invalid", "cpu", "100m", true, "", true},
		{"cpu*50%", "cpu", "0", true, "0", false},
		{"memory*25%", "memory", "400Mi", true, "100Mi", false},
		{"1", "cpu", "100m", true, "1", false},
		{"1", "memory", "100Mi", true, "1", false},
	}
	for _, tc := range tests {
		t.Run(tc.expr+"/"+tc.agg, func(t *testing.T) {
			got, err := evalField(tc.expr, tc.variable, tc.agg, tc.isLimit)
			if tc.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			if tc.want == "nil" {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			assert.Equal(t, 0, got.Cmp(resource.MustParse(tc.want)), "got %s want %s", got, tc.want)
			assert.Equal(t, tc.want, got.String())
		})
	}
}

// Beyond R12: exactness, units, formats, operators, precedence.
func TestEvalMore(t *testing.T) {
	tests := []struct {
		expr, variable, agg, want string
	}{
		{"cpu/3*3", "cpu", "100m", "100m"}, // exact, no intermediate truncation
		{"cpu/3", "cpu", "100m", "33m"},    // final truncation to milli
		{"cpu * 0.5", "cpu", "1", "500m"},  // number * quantity
		{"0.5*cpu - 0.3*max(0, cpu-4) + 0.3*max(0, cpu-8)", "cpu", "10", "3800m"},
		{"0.5*cpu - 0.3*max(0, cpu-4) + 0.3*max(0, cpu-8)", "cpu", "2", "1"},
		{"max( cpu * 0.5 , 50m )", "cpu", "40m", "50m"},
		{"max(min(cpu*50%, 100m), 50m)", "cpu", "1", "100m"},
		{"min(cpu*50%, 100m)", "cpu", "100m", "50m"},
		{"CPU*50%", "cpu", "1", "500m"},               // case-insensitive, as OpenKruise
		{"MAX(cpu, 2)", "cpu", "1", "2"},              // number vs quantity in max
		{"2*(cpu+100m)", "cpu", "100m", "400m"},       // parentheses
		{"cpu+100m*2", "cpu", "100m", "300m"},         // precedence
		{"cpu-50m-25m", "cpu", "100m", "25m"},         // left associativity
		{"-(-cpu)", "cpu", "100m", "100m"},            // unary minus
		{"cpu*1e1", "cpu", "100m", "1"},               // exponent
		{".5*cpu", "cpu", "100m", "50m"},              // leading dot
		{"1.5Gi", "memory", "1", "1536Mi"},            // fractional binary quantity
		{"memory + 1", "memory", "1Ki", "1025"},       // a unitless number is bytes
		{"memory / 2", "memory", "1Gi", "512Mi"},      // BinarySI kept through division
		{"1 + memory", "memory", "1Gi", "1073741825"}, // DecimalSI: the number came first
		{"memory*30%", "memory", "1001", "300300m"},   // sub-byte memory kept at milli precision
		{"1.5", "memory", "1", "1"},                   // unitless memory truncated to bytes
		{"1.5", "cpu", "1", "1500m"},
		{"2k", "memory", "1", "2k"},
		{"100M", "memory", "1", "100M"},
		{"cpu*\t50%\n", "cpu", "2", "1"}, // whitespace
	}
	for _, tc := range tests {
		t.Run(tc.expr+"/"+tc.agg, func(t *testing.T) {
			got, err := evalField(tc.expr, tc.variable, tc.agg, true)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.String())
		})
	}
}

func TestEvalErrors(t *testing.T) {
	tests := []struct {
		expr, variable, agg, wantErr string
	}{
		{"cpu*cpu", "cpu", "1", "cannot multiply two quantities"},
		{"1/cpu", "cpu", "1", "cannot divide by a quantity"},
		{"cpu/0", "cpu", "1", "division by zero"},
		{"cpu/(cpu-cpu)", "cpu", "1", "cannot divide by a quantity"},
		{"cpu/(1-1)", "cpu", "1", "division by zero"},
		{"-cpu", "cpu", "1", "negative"},
		{"cpu - 2", "cpu", "1", "negative"},
		{"1e300*1e300*1e300*1e300*1e300*1e300*1e300", "cpu", "1", "out of range"},
		{"1e301", "cpu", "1", "out of range"},
		{"1000000000000000000000*cpu", "cpu", "1", "out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			_, err := evalField(tc.expr, tc.variable, tc.agg, true)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.Contains(t, err.Error(), tc.expr, "error names the expression")
		})
	}
}

// ---- ValidateExpr: V48–V61 expression parts ----

func TestValidateExpr(t *testing.T) {
	tests := []struct {
		id, expr, variable string
		valid              bool
	}{
		{"V48 limits/requests cpu", "max(cpu*50%, 50m)", "cpu", true},
		{"V48 limits/requests memory", "max(memory*50%, 100Mi)", "memory", true},
		{"V56 invalid expression", "invalid expression @#$", "cpu", false},
		{"V57 unclosed max", "max(cpu*50%, 50m", "cpu", false},
		{"V58 one-argument max", "max(cpu*50%)", "cpu", false},
		{"V59 unknown variable", "invalidvar * 50%", "cpu", false},
		{"V60 linear formula", "0.5*cpu - 0.3*max(0, cpu-4) + 0.3*max(0, cpu-8)", "cpu", true},
		{"V60 bad requests cpu", "invalid expression @#$", "cpu", false},
		{"V60 bad limits memory", "max(memory*50%)", "memory", false},
		{"V60 bad requests memory", "invalidvar * 50%", "memory", false},
		{"V61 cpu*50%", "cpu*50%", "cpu", true},
		{"V61 max", "max(cpu*50%, 50m)", "cpu", true},
		{"V61 min", "min(cpu*50%, 100m)", "cpu", true},
		{"V61 linear", "0.5*cpu - 0.3*max(0, cpu-4) + 0.3*max(0, cpu-8)", "cpu", true},
		{"V61 spaces", "max( cpu * 0.5 , 50m )", "cpu", true},
		{"V61 memory", "memory*50%", "memory", true},
		{"V61 nested", "max(min(cpu*50%, 100m), 50m)", "cpu", true},
		{"V61 empty", "", "cpu", true},
		{"V61 invalidvar", "invalidvar * 50%", "cpu", false},
		{"V61 operator soup", "cpu +*/ 50%", "cpu", false},
		// Beyond the cases of compat §4.2.
		{"memory in a cpu field", "memory*50%", "cpu", false},
		{"three arguments", "max(cpu, 1, 2)", "cpu", false},
		{"unknown function", "avg(cpu, 1)", "cpu", false},
		{"empty call", "max()", "cpu", false},
		{"trailing operator", "cpu*", "cpu", false},
		{"dangling paren", "cpu)", "cpu", false},
		{"bad unit", "cpu*5x", "cpu", false}, // OpenKruise: silently 0 and valid
		{"bare exponent", "1e", "cpu", false},
		{"exponent with unit", "1e3Mi", "memory", false},
		{"Ei is not a unit", "1Ei", "memory", false},
		{"double percent", "50%%", "cpu", false},
		{"unary plus", "+cpu", "cpu", false},
		{"whitespace only", "   ", "cpu", false},
		{"non-ASCII", "cpu×2", "cpu", false},
		// Quirks kept from OpenKruise (validation binds the variable to the unitless number 1).
		{"quirk: cpu*cpu passes validation", "cpu*cpu", "cpu", true},
		{"quirk: negative at cpu=1 fails", "cpu - 2", "cpu", false},
		{"quirk: division by zero at cpu=1 fails", "1/(cpu-1)", "cpu", false},
		{"bad variable name", "cpu", "gpu", false},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			err := ValidateExpr(tc.expr, tc.variable)
			if tc.valid {
				assert.NoError(t, err)
			} else {
				require.Error(t, err)
				assert.True(t, strings.HasPrefix(err.Error(), "expression "), "error names the expression: %v", err)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	deep := strings.Repeat("(", maxDepth+5) + "cpu" + strings.Repeat(")", maxDepth+5)
	_, err := Parse(deep, "cpu")
	assert.ErrorContains(t, err, "nested too deeply")

	long := "cpu" + strings.Repeat("+1", maxNodes)
	_, err = Parse(long, "cpu")
	assert.ErrorContains(t, err, "too long")

	ok := strings.Repeat("(", 50) + "cpu" + strings.Repeat(")", 50)
	_, err = Parse(ok, "cpu")
	assert.NoError(t, err)
}

func TestExprReusable(t *testing.T) {
	e, err := Parse("max(cpu*50%, 50m)", "cpu")
	require.NoError(t, err)
	assert.Equal(t, "max(cpu*50%, 50m)", e.String())
	for _, tc := range []struct{ in, want string }{{"40m", "50m"}, {"1", "500m"}, {"40m", "50m"}, {"3", "1500m"}} {
		q, err := e.Eval(resource.MustParse(tc.in))
		require.NoError(t, err)
		assert.Equal(t, tc.want, q.String())
	}
}

// Hostile inputs finish quickly with an error or a value; none may hang or panic.
func TestPathologicalInputs(_ *testing.T) {
	inputs := []string{
		"cpu" + strings.Repeat("/3", 5000),
		"cpu" + strings.Repeat("*1e300", 100),
		"cpu" + strings.Repeat("*7/11", 4000),
		strings.Repeat("9", 5000) + "*cpu",
		"0." + strings.Repeat("0", 5000) + "1*cpu",
		strings.Repeat("9", 5000) + "Pi",
		strings.Repeat("-", 99) + "cpu",
		strings.Repeat("max(", 40) + "cpu" + strings.Repeat(",1)", 40),
		"cpu" + strings.Repeat("+0.1%", maxNodes/2-1),
	}
	for _, in := range inputs {
		for _, v := range []string{"cpu", "memory"} {
			e, err := Parse(strings.ReplaceAll(in, "cpu", v), v)
			if err != nil {
				continue
			}
			_, _ = e.Eval(resource.MustParse("1500m"))
			_ = ValidateExpr(e.String(), v)
		}
	}
}
