package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// propertyModule states, for one input {"selector": ..., "labels": ..., "pod": ...}, what the policies
// decide about it, so that one prepared query answers all of it per case:
//   - matches: selector.matches, the Kubernetes semantics every policy reads selectors with;
//   - failure_count: the number of selector.failures (-1 where failures is undefined: a null selector);
//   - empty: selector.is_empty;
//   - applies: match.applies for a SidecarSet that has only this pod selector (no namespace scope, not
//     paused), i.e. OpenKruise's pod-selector semantics as the injection decision uses them.
const propertyModule = `package sidecarops.selector_property

import data.sidecarops.match
import data.sidecarops.selector

default matches := false

matches if selector.matches(input.selector, input.labels)

default failure_count := -1

failure_count := count(selector.failures(input.selector, input.labels))

default empty := false

empty if selector.is_empty(input.selector)

default applies := false

applies if match.applies({"selector": input.selector})
`

// Small alphabets so that random selectors and random label sets meet often. "" is a valid label value
// and "example.com/d" a prefixed key; both are valid for LabelSelectorAsSelector.
var (
	propertyKeys   = []string{"a", "b", "c", "example.com/d"}
	propertyValues = []string{"", "x", "y", "z"}
)

// TestSelectorMatchesKubernetes ties selector.rego to k8s.io/apimachinery: for random selectors and
// label sets, selector.matches agrees with metav1.LabelSelectorAsSelector(sel).Matches(labels.Set(l)),
// selector.failures is empty exactly when it matches, and match.applies (the injection decision)
// agrees too — except on purpose for empty selectors, which the assertions below spell out.
func TestSelectorMatchesKubernetes(t *testing.T) {
	const cases = 5000
	ctx := context.Background()

	opts := []func(*rego.Rego){
		rego.Query("data.sidecarops.selector_property"),
		rego.Module("selector_property.rego", propertyModule),
	}
	for path, src := range Modules() {
		opts = append(opts, rego.Module(path, src))
	}
	query, err := rego.New(opts...).PrepareForEval(ctx)
	if err != nil {
		t.Fatalf("preparing the query: %v", err)
	}

	rng := rand.New(rand.NewPCG(20260101, 42)) // fixed seed: a failure reproduces
	var matched, matchedByTerms, unmatched, nilSelectors, emptySelectors, nilLabels int
	for i := range cases {
		sel := randomSelector(rng)
		podLabels := randomLabels(rng)
		if sel == nil {
			nilSelectors++
		}
		if podLabels == nil {
			nilLabels++
		}
		// What the Kubernetes libraries decide. Every generated selector is valid (In/NotIn carry at
		// least one value, Exists/DoesNotExist none), as validation requires of a SidecarSet.
		k8sSelector, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Fatalf("case %d: generated an invalid selector %s: %v", i, toJSON(t, sel), err)
		}
		want := k8sSelector.Matches(labels.Set(podLabels))
		if want {
			matched++
		} else {
			unmatched++
		}
		// A selector with no terms; nil is "no selector" (LabelSelectorAsSelector(nil) is labels.Nothing()),
		// &LabelSelector{} is labels.Everything().
		empty := sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0)
		if empty && sel != nil {
			emptySelectors++
		}
		if want && !empty {
			matchedByTerms++
		}

		got := evalProperty(ctx, t, query, sel, podLabels)
		describe := func() string {
			return fmt.Sprintf("case %d: selector %s, labels %s", i, toJSON(t, sel), toJSON(t, podLabels))
		}

		if got.Matches != want {
			t.Errorf("%s: selector.matches = %t, Kubernetes' LabelSelectorAsSelector(…).Matches = %t", describe(), got.Matches, want)
		}
		if sel != nil && (got.FailureCount == 0) != want {
			t.Errorf("%s: %d selector.failures, but Kubernetes says matches = %t", describe(), got.FailureCount, want)
		}
		if got.Empty != empty {
			t.Errorf("%s: selector.is_empty = %t, want %t", describe(), got.Empty, empty)
		}

		// The deliberate difference. Kubernetes: an empty (non-nil) selector matches every pod.
		// OpenKruise, and so sidecarops' injection decision (match.applies, compat §1.3): a SidecarSet
		// whose pod selector is unset or empty injects into no pod. selector.matches keeps the
		// Kubernetes meaning; match.applies adds the "not empty" condition.
		wantApplies := want && !empty
		if empty && sel != nil && !want {
			t.Errorf("%s: Kubernetes should match every pod with an empty selector", describe())
		}
		if got.Applies != wantApplies {
			t.Errorf("%s: match.applies = %t, want %t (Kubernetes matches = %t, empty selector = %t)",
				describe(), got.Applies, wantApplies, want, empty)
		}
		if t.Failed() {
			t.FailNow() // one reproducible counterexample is enough
		}
	}
	t.Logf("%d cases: %d matched (%d by a selector with terms), %d did not; %d nil selectors, %d empty selectors, %d nil label maps",
		cases, matched, matchedByTerms, unmatched, nilSelectors, emptySelectors, nilLabels)
	// Guard the generator: a property that held only because nothing ever matched would prove nothing.
	for name, n := range map[string]int{
		"matching": matchedByTerms, "non-matching": unmatched, "nil-selector": nilSelectors,
		"empty-selector": emptySelectors, "nil-labels": nilLabels,
	} {
		if n < cases/50 {
			t.Errorf("only %d %s cases of %d: the generator no longer covers them", n, name, cases)
		}
	}
}

type propertyResult struct {
	Matches      bool `json:"matches"`
	FailureCount int  `json:"failure_count"`
	Empty        bool `json:"empty"`
	Applies      bool `json:"applies"`
}

// evalProperty evaluates the prepared query on the wire forms of sel and podLabels (as the engine
// hands Kubernetes objects to OPA: their JSON): a nil selector is null, a nil label map is null for
// selector.matches and an absent metadata.labels in the pod, as JSON's omitempty writes it.
func evalProperty(ctx context.Context, t *testing.T, query rego.PreparedEvalQuery, sel *metav1.LabelSelector, podLabels map[string]string) propertyResult {
	t.Helper()
	metadata := map[string]any{"name": "pod"}
	if podLabels != nil {
		metadata["labels"] = fromJSON(t, podLabels)
	}
	input := map[string]any{
		"selector": fromJSON(t, sel),
		"labels":   fromJSON(t, podLabels),
		"pod":      map[string]any{"metadata": metadata},
	}
	rs, err := query.Eval(ctx, rego.EvalInput(input))
	if err != nil {
		t.Fatalf("eval: %v", err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		t.Fatalf("eval: want one result, got %v", rs)
	}
	var out propertyResult
	if err := json.Unmarshal([]byte(toJSON(t, rs[0].Expressions[0].Value)), &out); err != nil {
		t.Fatalf("eval result %v: %v", rs[0].Expressions[0].Value, err)
	}
	return out
}

// randomSelector returns nil (1 in 20), an empty selector (1 in 10: &{} or one with empty
// matchLabels and matchExpressions, the two wire forms), or 0-2 matchLabels and 0-3 matchExpressions
// (In, NotIn, Exists, DoesNotExist; keys may repeat, as the API allows), at least one term in all.
func randomSelector(rng *rand.Rand) *metav1.LabelSelector {
	switch rng.IntN(20) {
	case 0:
		return nil
	case 1:
		return &metav1.LabelSelector{}
	case 2:
		return &metav1.LabelSelector{MatchLabels: map[string]string{}, MatchExpressions: []metav1.LabelSelectorRequirement{}}
	}
	labelCount, expressionCount := rng.IntN(3), rng.IntN(4)
	if labelCount+expressionCount == 0 {
		expressionCount = 1 // empty selectors come from the cases above
	}
	sel := &metav1.LabelSelector{}
	if labelCount > 0 {
		sel.MatchLabels = map[string]string{}
		for range labelCount {
			sel.MatchLabels[pick(rng, propertyKeys)] = pick(rng, propertyValues)
		}
	}
	operators := []metav1.LabelSelectorOperator{
		metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist,
	}
	for range expressionCount {
		req := metav1.LabelSelectorRequirement{Key: pick(rng, propertyKeys), Operator: pick(rng, operators)}
		if req.Operator == metav1.LabelSelectorOpIn || req.Operator == metav1.LabelSelectorOpNotIn {
			for range 1 + rng.IntN(3) {
				req.Values = append(req.Values, pick(rng, propertyValues))
			}
		}
		sel.MatchExpressions = append(sel.MatchExpressions, req)
	}
	return sel
}

// randomLabels returns nil (1 in 10), an empty map (1 in 10) or 1-4 labels from the small alphabets.
func randomLabels(rng *rand.Rand) map[string]string {
	switch rng.IntN(10) {
	case 0:
		return nil
	case 1:
		return map[string]string{}
	}
	out := map[string]string{}
	for range 1 + rng.IntN(4) {
		out[pick(rng, propertyKeys)] = pick(rng, propertyValues)
	}
	return out
}

func pick[T any](rng *rand.Rand, from []T) T { return from[rng.IntN(len(from))] }

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %v: %v", v, err)
	}
	return string(b)
}

// fromJSON converts v to its JSON form as a generic value (nil → nil), the shape OPA's input takes.
func fromJSON(t *testing.T, v any) any {
	t.Helper()
	var out any
	if err := json.Unmarshal([]byte(toJSON(t, v)), &out); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	return out
}
