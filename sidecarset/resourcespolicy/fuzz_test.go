package resourcespolicy

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// FuzzParse: no input may panic, and whatever evaluates must be a non-negative quantity that
// round-trips through Kubernetes' parser.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"cpu*50%", "max(cpu*50%, 50m)", "min(cpu*50%, 100m)", "max(min(cpu*50%, 100m), 50m)",
		"0.5*cpu - 0.3*max(0, cpu-4) + 0.3*max(0, cpu-8)", "max( cpu * 0.5 , 50m )",
		"memory*30%", "max(memory*20% + 100Mi, 200Mi)", "1.5Gi", "1e3", ".5", "1e", "5x",
		"cpu +*/ 50%", "invalidvar * 50%", "max(cpu*50%)", "max(cpu*50%, 50m", "-(-cpu)",
		"cpu/0", "cpu*cpu", "1/cpu", "((((cpu))))", "1e300*1e300", "", "   ", "cpu×2",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	values := []resource.Quantity{
		resource.MustParse("0"), resource.MustParse("150m"), resource.MustParse("600Mi"),
		resource.MustParse("9223372036854775807"), resource.MustParse("1n"), resource.MustParse("-1"),
	}
	f.Fuzz(func(t *testing.T, expr string, memory bool) {
		variable := "cpu"
		if memory {
			variable = "memory"
		}
		_ = ValidateExpr(expr, variable)
		e, err := Parse(expr, variable)
		if err != nil {
			return
		}
		for _, v := range values {
			q, err := e.Eval(v)
			if err != nil {
				continue
			}
			if q.Sign() < 0 {
				t.Fatalf("%q at %s: negative result %s", expr, v.String(), q.String())
			}
			back, err := resource.ParseQuantity(q.String())
			if err != nil || back.Cmp(q) != 0 {
				t.Fatalf("%q at %s: result %s does not round-trip (%v)", expr, v.String(), q.String(), err)
			}
		}
	})
}
