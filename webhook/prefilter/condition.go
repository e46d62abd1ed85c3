package prefilter

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// MaxExpressionLength bounds the condition: beyond it the webhook is sent every pod instead. That
// is about 2,400 SidecarSets selecting app=application-number-N (one label: their values share a
// list), fewer with selectors of several terms. The API server's own CEL compiler accepts a
// condition of this size, cost limits included (tested).
const MaxExpressionLength = 64 << 10

// podLabels is the pod's labels as the API server's CEL sees the admitted object.
const podLabels = "object.metadata.labels"

// Condition compiles sets into a CEL expression over an admission request that is true for every
// pod one of them may inject into (compat §1.12: pod selector and namespace scope). filter is false
// when there is no condition to register — a selector it cannot express, or an expression over
// MaxExpressionLength — and reason then says why; the webhook must then be sent every pod.
//
// It is exact on pod labels and on namespace selectors over the namespace's name label (as
// spec.namespace becomes); it treats selectors on other namespace labels, which CEL cannot see, as
// matching.
func Condition(sets []*v1beta1.SidecarSet) (expr string, filter bool, reason string) {
	terms, reason := compileAll(sets)
	if reason != "" {
		return "", false, reason
	}
	return conditionOf(terms, len(sets))
}

func compileAll(sets []*v1beta1.SidecarSet) ([]term, string) {
	terms := make([]term, 0, len(sets))
	for _, ss := range sets {
		t, err := compile(ss)
		if err != nil {
			return nil, fmt.Sprintf("SidecarSet/%s: %v", ss.Name, err)
		}
		if !t.never {
			terms = append(terms, t)
		}
	}
	return terms, ""
}

// conditionOf is Condition of the SidecarSets whose terms are given (n SidecarSets in all).
func conditionOf(terms []term, n int) (expr string, filter bool, reason string) {
	var withLabels, withoutLabels []string
	// The usual fleet selects by one label (app=…): SidecarSets whose selector is one In term on the
	// same key, in the same namespace scope, become one term listing all their values.
	type scopedKey struct{ key, namespace string }
	listed := map[scopedKey][]string{}
	for _, t := range terms {
		if t.in != nil {
			k := scopedKey{t.in.key, and(t.namespace)}
			listed[k] = append(listed[k], t.in.values...)
			continue
		}
		withLabels = append(withLabels, and(append(slices.Clone(t.namespace), t.pod...)))
		if t.podMatchesNoLabels {
			withoutLabels = append(withoutLabels, and(t.namespace))
		}
	}
	for k, values := range listed {
		slices.Sort(values)
		c, _ := requirement{key: k.key, op: metav1.LabelSelectorOpIn, values: slices.Compact(values)}.cel(labelSubject)
		conj := []string{c}
		if k.namespace != "true" {
			conj = append(conj, k.namespace)
		}
		withLabels = append(withLabels, and(conj))
	}
	expr = or(withLabels)
	if unlabelled := or(withoutLabels); unlabelled != expr {
		expr = fmt.Sprintf("has(%s) ? %s : %s", podLabels, expr, unlabelled)
	}
	if len(expr) > MaxExpressionLength {
		return "", false, fmt.Sprintf("the condition for %d SidecarSets would be %d characters, over %d", n, len(expr), MaxExpressionLength)
	}
	return expr, true, ""
}

// term is one SidecarSet's condition: a conjunction over the namespace and over the pod's labels.
type term struct {
	// never: the SidecarSet injects into no pod (injection paused, an empty pod selector, a
	// namespace scope no name satisfies).
	never bool
	// namespace and pod are the conjuncts; an empty list holds.
	namespace, pod []string
	// podMatchesNoLabels: the pod conjuncts hold for a pod without labels.
	podMatchesNoLabels bool
	// in is the pod selector when it is a single In term (or one matchLabels pair).
	in *requirement
	// reqs are the pod selector's requirements, sorted (Filter's object selector is made of them).
	reqs []requirement
}

func compile(ss *v1beta1.SidecarSet) (term, error) {
	sel := ss.Spec.Selector
	// OpenKruise injects nowhere with an unset or empty pod selector (compat §1.3), nor while
	// injection is paused.
	if ss.Spec.InjectionStrategy.Paused || sel == nil || len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		return term{never: true}, nil
	}
	t, err := compilePod(requirements(sel))
	if err != nil {
		return term{}, fmt.Errorf("spec.selector: %w", err)
	}
	if ns := ss.Spec.NamespaceSelector; ns != nil {
		for _, r := range requirements(ns) {
			if r.key != v1beta1.NamespaceNameLabel {
				continue // a label CEL cannot see: may match
			}
			if r.op == metav1.LabelSelectorOpDoesNotExist {
				return term{never: true}, nil // every Namespace has its name label
			}
			c, err := r.cel(nameSubject)
			if err != nil {
				return term{}, fmt.Errorf("namespace scope: %w", err)
			}
			t.namespace = append(t.namespace, c)
		}
	}
	slices.Sort(t.namespace)
	return t, nil
}

// compilePod is the term of a pod selector's requirements in every namespace.
func compilePod(reqs []requirement) (term, error) {
	t := term{podMatchesNoLabels: true, reqs: reqs}
	if len(reqs) == 1 && reqs[0].op == metav1.LabelSelectorOpIn && len(reqs[0].values) > 0 {
		t.in = &reqs[0]
	}
	for _, r := range reqs {
		c, err := r.cel(labelSubject)
		if err != nil {
			return term{}, err
		}
		t.pod = append(t.pod, c)
		t.podMatchesNoLabels = t.podMatchesNoLabels && !r.needsLabel()
	}
	slices.Sort(t.pod)
	return t, nil
}

// requirement is one term of a LabelSelector, matchLabels k=v being "k In [v]".
type requirement struct {
	key    string
	op     metav1.LabelSelectorOperator
	values []string
}

func requirements(s *metav1.LabelSelector) []requirement {
	out := make([]requirement, 0, len(s.MatchLabels)+len(s.MatchExpressions))
	for k, v := range s.MatchLabels {
		out = append(out, requirement{key: k, op: metav1.LabelSelectorOpIn, values: []string{v}})
	}
	for _, e := range s.MatchExpressions {
		out = append(out, requirement{key: e.Key, op: e.Operator, values: e.Values})
	}
	// Map order is random: sorted, equal selectors give equal registrations.
	slices.SortFunc(out, func(a, b requirement) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.op, b.op), slices.Compare(a.values, b.values))
	})
	return out
}

// needsLabel: the requirement fails on an object without the key (k8s labels.Requirement.Matches).
func (r requirement) needsLabel() bool {
	return r.op == metav1.LabelSelectorOpIn || r.op == metav1.LabelSelectorOpExists
}

// subject says how CEL reads one label: whether it is present and its value.
type subject struct {
	has func(key string) string // "" when always present
	get func(key string) string
}

var labelSubject = subject{
	has: func(key string) string { return strconv.Quote(key) + " in " + podLabels },
	get: func(key string) string { return podLabels + "[" + strconv.Quote(key) + "]" },
}

// nameSubject reads the namespace's name label, which is the request's namespace.
var nameSubject = subject{
	has: func(string) string { return "" },
	get: func(string) string { return "request.namespace" },
}

// cel is the requirement over s, with Kubernetes' semantics: In and Exists need the key, NotIn and
// DoesNotExist hold without it. The presence test comes first: CEL's && and || absorb the error of
// indexing a missing key when the other side decides.
func (r requirement) cel(s subject) (string, error) {
	var listed string
	switch r.op {
	case metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn:
		if len(r.values) == 0 {
			return "", fmt.Errorf("%s %s: needs values", r.key, r.op)
		}
		quoted := make([]string, len(r.values))
		for i, v := range r.values {
			quoted[i] = strconv.Quote(v)
		}
		slices.Sort(quoted)
		if len(quoted) == 1 {
			listed = s.get(r.key) + " == " + quoted[0]
		} else {
			listed = s.get(r.key) + " in [" + strings.Join(quoted, ", ") + "]"
		}
		if has := s.has(r.key); has != "" {
			listed = "(" + has + " && " + listed + ")"
		}
	case metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist:
	default:
		return "", fmt.Errorf("%s: unsupported operator %q", r.key, r.op)
	}
	switch r.op {
	case metav1.LabelSelectorOpIn:
		return listed, nil
	case metav1.LabelSelectorOpNotIn:
		return "!(" + listed + ")", nil
	case metav1.LabelSelectorOpExists:
		return presence(s, r.key), nil
	default: // DoesNotExist
		return "!(" + presence(s, r.key) + ")", nil
	}
}

func presence(s subject, key string) string {
	if has := s.has(key); has != "" {
		return has
	}
	return "true"
}

func and(cs []string) string {
	switch len(cs) {
	case 0:
		return "true"
	case 1:
		return cs[0]
	}
	return "(" + strings.Join(cs, " && ") + ")"
}

// or joins distinct terms in a stable order, so equal fleets give byte-equal conditions and the
// registration is only rewritten when the condition changes.
func or(terms []string) string {
	slices.Sort(terms)
	terms = slices.Compact(terms)
	switch len(terms) {
	case 0:
		return "false"
	case 1:
		return terms[0]
	}
	if slices.Contains(terms, "true") {
		return "true"
	}
	return "(" + strings.Join(terms, " || ") + ")"
}
