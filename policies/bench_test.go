package policies_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/sidecarops/sidecarops/policies"
)

// benchSidecarSets is the scale the match policy is designed for (docs/design.md).
const benchSidecarSets = 10000

// benchState builds normalised SidecarSets: app=svc-(i%2000), a NotIn term, every third one scoped to
// a namespace, and the candidate index bundles would generate for them (label and namespace equalities).
func benchState() (map[string]any, string) {
	sets := make(map[string]any, benchSidecarSets)
	var index strings.Builder
	index.WriteString("package sidecarops.index\n")
	for i := range benchSidecarSets {
		name := fmt.Sprintf("ss-%05d", i)
		app := fmt.Sprintf("svc-%d", i%2000)
		var nsSelector any
		ns := ""
		conds := fmt.Sprintf("input.pod.metadata.labels[\"app\"] == %q", app)
		if i%3 == 0 {
			ns = fmt.Sprintf("ns-%d", i%50)
			nsSelector = map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns}, "matchExpressions": []any{}}
			conds += fmt.Sprintf("\n\tinput.namespace == %q", ns)
		}
		sets[name] = map[string]any{
			"name": name, "labels": map[string]any{}, "canary": false, "base": "",
			"selector": map[string]any{
				"matchLabels":      map[string]any{"app": app},
				"matchExpressions": []any{map[string]any{"key": "tier", "operator": "NotIn", "values": []any{"batch"}}},
			},
			"namespace": ns, "namespaceSelector": nsSelector, "injectionPaused": false, "updateType": "RollingUpdate",
			"containers": []any{fmt.Sprintf("c-%d", i)}, "initContainers": []any{},
			"volumes":          map[string]any{"v": map[string]any{"name": "v", "emptyDir": map[string]any{}}},
			"volumeNames":      []any{"v"},
			"patchPodMetadata": []any{map[string]any{"patchPolicy": "MergePatchJson", "annotations": map[string]any{"k": "{}"}}},
		}
		fmt.Fprintf(&index, "\ncandidates contains %q if {\n\t%s\n}\n", name, conds)
	}
	return map[string]any{"sidecarops": map[string]any{"state": map[string]any{"sidecarsets": sets, "namespaces": map[string]any{}}}}, index.String()
}

func prepare(b *testing.B, query string) rego.PreparedEvalQuery {
	b.Helper()
	data, index := benchState()
	// As the engine configures its store: values are read as AST, not converted per evaluation.
	store := inmem.NewFromObjectWithOpts(data, inmem.OptRoundTripOnWrite(true), inmem.OptReturnASTValuesOnRead(true))
	opts := []func(*rego.Rego){rego.Query(query), rego.Store(store), rego.Module("sidecarops/index.rego", index)}
	for path, src := range policies.Modules() {
		opts = append(opts, rego.Module(path, src))
	}
	pq, err := rego.New(opts...).PrepareForEval(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return pq
}

func bench(b *testing.B, pq rego.PreparedEvalQuery, input map[string]any, want func(any) bool) {
	in, err := ast.InterfaceToValue(input)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		rs, err := pq.Eval(ctx, rego.EvalParsedInput(in))
		if err != nil || len(rs) != 1 || !want(rs[0].Expressions[0].Value) {
			b.Fatalf("unexpected result %v, %v", rs, err)
		}
	}
}

// BenchmarkMatch10k is the per-pod-admission cost with 10,000 SidecarSets, five of which match.
func BenchmarkMatch10k(b *testing.B) {
	pq := prepare(b, "data.sidecarops.match.decision")
	pod := map[string]any{"metadata": map[string]any{"name": "p", "labels": map[string]any{"app": "svc-3", "tier": "web"}}}
	bench(b, pq, map[string]any{"namespace": "ns-3", "pod": pod}, func(v any) bool {
		return len(v.(map[string]any)["matched"].([]any)) == 5
	})
}

// BenchmarkConflict10k is the cost of validating one SidecarSet against 10,000 others (one collision).
func BenchmarkConflict10k(b *testing.B) {
	pq := prepare(b, "data.sidecarops.conflict.violations")
	mine := map[string]any{
		"name": "new", "labels": map[string]any{}, "canary": false, "base": "",
		"selector":  map[string]any{"matchLabels": map[string]any{"app": "svc-3"}, "matchExpressions": []any{}},
		"namespace": "", "namespaceSelector": nil, "injectionPaused": false, "updateType": "RollingUpdate",
		"containers": []any{"c-3", "x"}, "initContainers": []any{"i"},
		"volumes":          map[string]any{"v": map[string]any{"name": "v", "emptyDir": map[string]any{}}},
		"volumeNames":      []any{"v"},
		"patchPodMetadata": []any{map[string]any{"patchPolicy": "Overwrite", "annotations": map[string]any{"other": "v"}}},
	}
	bench(b, pq, map[string]any{"sidecarset": mine}, func(v any) bool { return len(v.([]any)) == 1 })
}
