package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
)

// Decision is the pod decision: the SidecarSets to inject, in order, or the gates' reasons not to.
type Decision struct {
	// Revision is the compiled bundle revision the decision was made with.
	Revision string
	// Matched are the SidecarSets to inject, in the policies' order (by name). The list may be
	// another decision's too: treat it as read-only.
	Matched []*v1beta1.SidecarSet
	// Denied are the administrators' gate reasons; non-empty means nothing is injected.
	Denied []string
	// Withheld are SidecarSets the pod matched but does not get: each collides with an older one
	// that is injected (decision D7). Only two SidecarSets admitted at the same moment can.
	Withheld []Withheld

	names []string // of Matched, as the policy answered them
}

// Withheld is a SidecarSet left out of a pod because it collides with an older one, CollidesWith.
type Withheld struct {
	SidecarSet, CollidesWith string
}

// MatchedNames lists the names of the matched SidecarSets. The list of a decision the engine made is
// the one it read from the policy, shared by every caller: treat it as read-only.
func (d Decision) MatchedNames() []string {
	if d.names != nil && len(d.names) == len(d.Matched) {
		return d.names
	}
	names := make([]string, len(d.Matched))
	for i, ss := range d.Matched {
		names[i] = ss.Name
	}
	return names
}

// Decide evaluates the match decision for a pod given as JSON, in namespace ns.
func (s *Snapshot) Decide(ctx context.Context, ns string, podJSON []byte) (Decision, error) {
	in, err := s.Input(ns, podJSON)
	if err != nil {
		return Decision{}, err
	}
	return s.DecideInput(ctx, in)
}

// DecideDecoded is Decide for a pod the caller has already decoded without error from podJSON, with
// a decoder that refuses duplicate names and tells names apart by case (the webhook's), or
// marshalled into podJSON. That spares validating the JSON again, which on a real pod costs as much
// as a tenth of the decision, and the input is built from the decoded fields where they say exactly
// what the JSON does (typedInput). pod.Namespace is not read. Given anything else, the answer is
// undefined.
func (s *Snapshot) DecideDecoded(ctx context.Context, ns string, pod *corev1.Pod, podJSON []byte) (Decision, error) {
	in, ok := typedInput(s.podProjection, ns, pod, podJSON)
	if !ok {
		var err error
		if in, err = decodedInput(s.podProjection, ns, podJSON); err != nil {
			return Decision{}, err
		}
	}
	return s.DecideInput(ctx, in)
}

// DecideInput is Decide for an input already built by Input, so a caller that evaluates several
// decisions for one pod converts it once.
func (s *Snapshot) DecideInput(ctx context.Context, in ast.Value) (Decision, error) {
	if s.delta != nil {
		var err error
		if in, err = s.delta.input(ctx, in); err != nil {
			return Decision{}, err
		}
	}
	t, err := s.match.eval(ctx, in)
	if err != nil {
		return Decision{}, fmt.Errorf("engine: %s: %w", matchQuery, err)
	}
	return s.decision(t)
}

// decision reads the match policy's value, t (nil: undefined, which matches nothing).
func (s *Snapshot) decision(t *ast.Term) (Decision, error) {
	d := Decision{Revision: s.revision}
	if t == nil {
		return d, nil
	}
	obj, ok := t.Value.(ast.Object)
	if !ok {
		return Decision{}, fmt.Errorf("engine: %s: want an object, got %v", matchQuery, t)
	}
	matched, err := s.matchedLists(obj.Get(keyMatched))
	if err != nil {
		return Decision{}, err
	}
	d.Matched, d.names = matched.sets, matched.names
	if d.Denied, err = stringList(obj.Get(keyDenied), keyDenied); err != nil {
		return Decision{}, err
	}
	if d.Withheld, err = withheldList(obj); err != nil {
		return Decision{}, err
	}
	return d, nil
}

// matchedLists are a decision's matched SidecarSets, by name and as the snapshot's objects.
type matchedLists struct {
	names []string
	sets  []*v1beta1.SidecarSet
}

// matchedLists reads decision.matched, v. Most pods match the SidecarSets the pod before matched:
// those lists are then the last decision's, shared (read-only, as Decision says), instead of two
// allocations per pod.
func (s *Snapshot) matchedLists(v *ast.Term) (matchedLists, error) {
	memo := s.lastMatched // nil for a snapshot made without objects
	if memo != nil {
		if last := memo.Load(); last != nil && sameStrings(v, last.names) {
			return *last, nil
		}
	}
	names, err := stringList(v, keyMatched)
	if err != nil || len(names) == 0 {
		return matchedLists{names: names}, err
	}
	// Clipped: an append by a reader copies instead of writing into another decision's list.
	l := &matchedLists{names: slices.Clip(names), sets: make([]*v1beta1.SidecarSet, len(names))}
	for i, name := range names {
		ss, ok := s.sidecarSets[name]
		if !ok {
			return matchedLists{}, fmt.Errorf("engine: policy matched SidecarSet %q that the snapshot does not hold", name)
		}
		l.sets[i] = ss
	}
	if memo != nil {
		memo.Store(l)
	}
	return *l, nil
}

// sameStrings reports whether v is an array of exactly these strings.
func sameStrings(v *ast.Term, names []string) bool {
	if v == nil {
		return false
	}
	a, ok := v.Value.(*ast.Array)
	if !ok || a.Len() != len(names) {
		return false
	}
	for i, name := range names {
		if s, ok := a.Elem(i).Value.(ast.String); !ok || string(s) != name {
			return false
		}
	}
	return true
}

// The keys of the decision object, made once: a term made per lookup was an allocation each.
var (
	keyMatched  = ast.StringTerm("matched")
	keyDenied   = ast.StringTerm("denied")
	keyWithheld = ast.StringTerm("withheld")
)

// eachElement calls f with each member of v, the decision's key, an array or a set (nil: none),
// until f fails.
func eachElement(v, key *ast.Term, f func(*ast.Term) error) error {
	if v == nil {
		return nil
	}
	switch x := v.Value.(type) {
	case *ast.Array:
		for i := range x.Len() {
			if err := f(x.Elem(i)); err != nil {
				return err
			}
		}
		return nil
	case ast.Set:
		for _, t := range x.Slice() {
			if err := f(t); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("engine: %s.%v: want an array, got %v", matchQuery, key, v)
}

// stringList reads v, the decision's key, a list of strings; empty, not nil, when v is.
func stringList(v, key *ast.Term) ([]string, error) {
	var out []string
	if v != nil {
		if a, ok := v.Value.(*ast.Array); ok {
			out = make([]string, 0, a.Len())
		}
	}
	err := eachElement(v, key, func(t *ast.Term) error {
		s, ok := t.Value.(ast.String)
		if !ok {
			return fmt.Errorf("engine: %s.%v: want strings, got %v", matchQuery, key, t)
		}
		out = append(out, string(s))
		return nil
	})
	return out, err
}

// withheldList reads decision.withheld, pairs [withheld, collides with].
func withheldList(obj ast.Object) ([]Withheld, error) {
	var out []Withheld
	err := eachElement(obj.Get(keyWithheld), keyWithheld, func(t *ast.Term) error {
		pair, _ := t.Value.(*ast.Array)
		var a, b ast.String
		var ok1, ok2 bool
		if pair != nil && pair.Len() == 2 {
			a, ok1 = pair.Elem(0).Value.(ast.String)
			b, ok2 = pair.Elem(1).Value.(ast.String)
		}
		if !ok1 || !ok2 {
			return fmt.Errorf("engine: %s.withheld: want [name, name] pairs, got %v", matchQuery, t)
		}
		out = append(out, Withheld{SidecarSet: string(a), CollidesWith: string(b)})
		return nil
	})
	return out, err
}

// Input converts a pod's JSON into the decision input once, keeping only what the snapshot's
// policies read.
func (s *Snapshot) Input(ns string, podJSON []byte) (ast.Value, error) {
	return input(s.podProjection, ns, podJSON)
}

// Explain returns, for every SidecarSet, ["matches"] or the reasons it does not match the pod.
func (s *Snapshot) Explain(ctx context.Context, ns string, podJSON []byte) (map[string][]string, error) {
	in, err := s.Input(ns, podJSON)
	if err != nil {
		return nil, err
	}
	t, err := s.explain.eval(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("engine: %s: %w", explainQuery, err)
	}
	out := map[string][]string{}
	if t != nil {
		if err := ast.As(t.Value, &out); err != nil {
			return nil, fmt.Errorf("engine: %s result: %w", explainQuery, err)
		}
	}
	return out, nil
}

// Violation is one policy finding about a SidecarSet, shaped as a Kubernetes field error.
type Violation struct {
	Field   string          `json:"field"`
	Value   json.RawMessage `json:"value,omitempty"`
	Type    string          `json:"type,omitempty"`
	Message string          `json:"message"`
	Other   string          `json:"other,omitempty"`
}

// key identifies a violation apart from its field path, whose index an update may shift.
func (v Violation) key() [3]string { return [3]string{v.Other, string(v.Value), v.Message} }

// FieldError converts the violation into an apimachinery field error for uniform reporting.
func (v Violation) FieldError() *field.Error {
	var value any
	if len(v.Value) > 0 {
		_ = json.Unmarshal(v.Value, &value)
	}
	path := field.NewPath(v.Field)
	switch v.Type {
	case "Required":
		return field.Required(path, v.Message)
	case "Forbidden":
		return field.Forbidden(path, v.Message)
	default:
		return field.Invalid(path, value, v.Message)
	}
}

// Conflicts evaluates the cross-SidecarSet conflict decision for ss against the snapshot's others.
func (s *Snapshot) Conflicts(ctx context.Context, ss *v1beta1.SidecarSet) ([]Violation, error) {
	return s.sidecarSetViolations(ctx, conflictQuery, s.conflict, ss)
}

// Whitelist evaluates which of ss's patchPodMetadata keys the administrators' whitelist refuses.
func (s *Snapshot) Whitelist(ctx context.Context, ss *v1beta1.SidecarSet) ([]Violation, error) {
	return s.sidecarSetViolations(ctx, whitelistQuery, s.whitelist, ss)
}

func (s *Snapshot) sidecarSetViolations(ctx context.Context, query string, pq interface {
	Eval(context.Context, ...rego.EvalOption) (rego.ResultSet, error)
}, ss *v1beta1.SidecarSet) ([]Violation, error) {
	doc, err := bundles.Normalize(ss)
	if err != nil {
		return nil, err
	}
	in, err := ast.InterfaceToValue(map[string]any{"sidecarset": doc})
	if err != nil {
		return nil, fmt.Errorf("engine: SidecarSet/%s input: %w", ss.Name, err)
	}
	rs, err := pq.Eval(ctx, rego.EvalParsedInput(in), rego.EvalExternalCancel(ctxCancel{ctx}))
	if err != nil {
		return nil, fmt.Errorf("engine: %s: %w", query, err)
	}
	var out []Violation
	if len(rs) > 0 && len(rs[0].Expressions) > 0 {
		if err := decode(rs[0].Expressions[0].Value, &out); err != nil {
			return nil, fmt.Errorf("engine: %s result: %w", query, err)
		}
	}
	return out, nil
}

// PolicyErrors is what the policies say against admitting ss beside the others: conflicts, then
// the whitelist, as field errors in a stable order, each naming the other SidecarSet involved
// (decision D6). On UPDATE the snapshot still holds the old version under the same name;
// the conflict policy never compares a SidecarSet with its namesake.
//
// old, on UPDATE (defaulted, else nil), had conflicts of its own only if it was admitted at the
// same moment as the other side (decision D7): an update is refused only for a conflict old did
// not have, so that both sides stay updatable and either can resolve it.
func (s *Snapshot) PolicyErrors(ctx context.Context, ss, old *v1beta1.SidecarSet) (field.ErrorList, error) {
	conflicts, err := s.Conflicts(ctx, ss)
	if err != nil {
		return nil, err
	}
	if old != nil && len(conflicts) > 0 {
		before, err := s.Conflicts(ctx, old)
		if err != nil {
			return nil, err
		}
		had := make(map[[3]string]bool, len(before))
		for _, v := range before {
			had[v.key()] = true
		}
		conflicts = slices.DeleteFunc(conflicts, func(v Violation) bool { return had[v.key()] })
	}
	denied, err := s.Whitelist(ctx, ss)
	if err != nil {
		return nil, err
	}
	errs := make(field.ErrorList, 0, len(conflicts)+len(denied))
	for _, v := range append(conflicts, denied...) {
		fe := v.FieldError()
		// The policies' messages are OpenKruise's and name the other object already; this guards a
		// policy (an administrator's, say) whose message would not.
		if v.Other != "" && !strings.Contains(fe.Detail, v.Other) {
			fe.Detail += fmt.Sprintf(" (SidecarSet %s)", v.Other)
		}
		errs = append(errs, fe)
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs, nil
}
