package prefilter

import (
	"slices"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/podwebhook"
)

// Filter is what the pod webhook's registration asks of a pod before the API server sends it: an
// object selector and a match condition (Condition's CEL), each optional, both required to hold.
// They cost the API server very differently: it checks a selector on the pod's labels alone, but
// converts the whole pod for CEL, which costs it CPU on every pod (docs/benchmarks.md, "Pod creation
// through the API server"). So the selector says as much as it can, and the condition is left
// out wherever the selector says all of it.
type Filter struct {
	// Selector is nil when there is none (the API server's default, an empty selector, is read as nil).
	Selector *metav1.LabelSelector
	// Expression is "" when there is no condition.
	Expression string
}

// Filtered is false when the API server is to send the webhook every pod.
func (f Filter) Filtered() bool { return f.Selector != nil || f.Expression != "" }

// CEL is the filter as one condition ("" when it filters nothing): the condition, conjoined with
// the selector's own.
func (f Filter) CEL() string {
	if f.Selector == nil {
		return f.Expression
	}
	t, err := compilePod(requirements(f.Selector))
	if err != nil {
		// Not a selector Compile makes: nothing can be said of it, so every pod passes.
		return or([]string{"true", f.Expression})
	}
	sel, _, _ := conditionOf([]term{t}, 1)
	if f.Expression == "" {
		return sel
	}
	return "(" + sel + ") && (" + f.Expression + ")"
}

// Compile is the filter for sets: Condition's, with the object selector that every pod it lets
// through satisfies. When that selector is the condition — one pod selector for the whole fleet,
// or one label listing values (app in (…)), without namespace scopes — it is registered alone.
// filter and reason are Condition's.
func Compile(sets []*v1beta1.SidecarSet) (f Filter, filter bool, reason string) {
	terms, reason := compileAll(sets)
	if reason != "" {
		return Filter{}, false, reason
	}
	expr, filter, reason := conditionOf(terms, len(sets))
	if !filter {
		return Filter{}, false, reason
	}
	sel, exact := selectorOf(terms)
	if sel != nil {
		if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
			// A value no pod label can have (SidecarSets do not require valid ones) would have
			// the whole registration refused: the condition says it instead.
			sel, exact = nil, false
		}
	}
	if exact {
		return Filter{Selector: sel}, true, ""
	}
	return Filter{Selector: sel, Expression: expr}, true, ""
}

// selectorOf is a label selector that holds for every pod one of terms may select, and whether it
// holds for no other pod (in whichever namespace).
func selectorOf(terms []term) (sel *metav1.LabelSelector, exact bool) {
	if len(terms) == 0 {
		return nil, false
	}
	scoped := slices.ContainsFunc(terms, func(t term) bool { return len(t.namespace) > 0 })
	first := terms[0]
	samePod := func(t term) bool { return slices.Equal(t.pod, first.pod) }
	if !slices.ContainsFunc(terms[1:], func(t term) bool { return !samePod(t) }) {
		return selector(first.reqs), !scoped
	}
	if first.in != nil && !slices.ContainsFunc(terms[1:], func(t term) bool { return t.in == nil || t.in.key != first.in.key }) {
		var values []string
		for _, t := range terms {
			values = append(values, t.in.values...)
		}
		return selector([]requirement{{key: first.in.key, op: metav1.LabelSelectorOpIn, values: values}}), !scoped
	}
	// What each of them requires of a label: its presence, and, when each lists values, one of
	// them. The condition says the rest.
	var common []requirement
	for _, r := range first.reqs {
		if !r.needsLabel() || slices.ContainsFunc(common, func(c requirement) bool { return c.key == r.key }) {
			continue
		}
		req := requirement{key: r.key, op: metav1.LabelSelectorOpIn}
		for _, t := range terms {
			i := slices.IndexFunc(t.reqs, func(o requirement) bool { return o.key == r.key && o.op == metav1.LabelSelectorOpIn })
			switch {
			case i >= 0:
				req.values = append(req.values, t.reqs[i].values...)
			case slices.ContainsFunc(t.reqs, func(o requirement) bool { return o.key == r.key && o.needsLabel() }):
				req.op = metav1.LabelSelectorOpExists
			default:
				req.op = ""
			}
			if req.op == "" {
				break
			}
		}
		switch req.op {
		case "":
			continue
		case metav1.LabelSelectorOpExists:
			req.values = nil
		}
		common = append(common, req)
	}
	if len(common) == 0 {
		return nil, false
	}
	return selector(common), false
}

// selector writes requirements as a LabelSelector, every one a match expression, in their order,
// each one's values sorted and once.
func selector(reqs []requirement) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchExpressions: make([]metav1.LabelSelectorRequirement, len(reqs))}
	for i, r := range reqs {
		values := slices.Clone(r.values)
		slices.Sort(values)
		s.MatchExpressions[i] = metav1.LabelSelectorRequirement{Key: r.key, Operator: r.op, Values: slices.Compact(values)}
	}
	return s
}

// Registered is the prefilter's filter on the named webhook of cfg and whether that webhook exists.
func Registered(cfg *admissionregv1.MutatingWebhookConfiguration, webhook string) (Filter, bool) {
	for _, w := range cfg.Webhooks {
		if w.Name != webhook {
			continue
		}
		var f Filter
		if s := w.ObjectSelector; s != nil && len(s.MatchLabels)+len(s.MatchExpressions) > 0 {
			f.Selector = s
		}
		for _, c := range w.MatchConditions {
			if c.Name == podwebhook.ConditionName {
				f.Expression = c.Expression
			}
		}
		return f, true
	}
	return Filter{}, false
}

// ownFilter is Registered less an object selector another field manager owns (foreign): an
// administrator's, which stays theirs, and which the prefilter's condition need not repeat.
func ownFilter(cfg *admissionregv1.MutatingWebhookConfiguration, webhook string) (f Filter, foreign, found bool) {
	f, found = Registered(cfg, webhook)
	if f.Selector != nil && selectorOwnedByOthers(cfg, webhook) {
		f.Selector, foreign = nil, true
	}
	return f, foreign, found
}

// selectorOwnedByOthers reports whether a field manager other than ours owns the object selector
// of the pod webhook in cfg: one an administrator set, which the prefilter must not replace.
// Only that webhook's selector counts: owners of the other webhooks' selectors (a chart that
// renders them, or an API server that records defaulted ones for their creator) would otherwise
// make the prefilter drop its own selector, see it gone, and set it again, without end.
func selectorOwnedByOthers(cfg *admissionregv1.MutatingWebhookConfiguration, webhook string) bool {
	prefix := fieldpath.MakePathOrDie("webhooks", fieldpath.KeyByFields("name", webhook), "objectSelector")
	for _, m := range cfg.ManagedFields {
		if m.Manager == FieldOwner || m.FieldsV1 == nil {
			continue
		}
		owned := &fieldpath.Set{}
		if err := owned.FromJSON(m.FieldsV1.GetRawReader()); err != nil {
			// Unreadable: taken as an administrator's, which only keeps the prefilter to its
			// condition (API server time, never a sidecar).
			return true
		}
		found := false
		owned.Iterate(func(p fieldpath.Path) {
			found = found || (len(p) >= len(prefix) && p[:len(prefix)].Equals(prefix))
		})
		if found {
			return true
		}
	}
	return false
}
