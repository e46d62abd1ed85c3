package resourcespolicy

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

func BenchmarkParseEval(b *testing.B) {
	cpu := resource.MustParse("600m")
	b.ReportAllocs()
	for b.Loop() {
		e, err := Parse("max(cpu*50%, 50m)", "cpu")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.Eval(cpu); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEval(b *testing.B) {
	cpu := resource.MustParse("600m")
	e, err := Parse("max(cpu*50%, 50m)", "cpu")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Eval(cpu); err != nil {
			b.Fatal(err)
		}
	}
}
