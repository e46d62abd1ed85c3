package bundles

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// Root is the data path the compiled bundle owns. Administrators' bundles use other roots.
const Root = "sidecarops"

// WhitelistRoot is the data root of the administrators' patchPodMetadata whitelist (docs/design.md,
// data.whitelist), whether it arrives as a bundle or converted from the kruise-configuration ConfigMap.
const WhitelistRoot = "whitelist"

// IndexModulePath is where the generated candidate-index module sits in the bundle.
const IndexModulePath = "sidecarops/index.rego"

// State is everything the decisions depend on besides the pod itself.
type State struct {
	// SidecarSets must already be defaulted and hashed (package defaults).
	SidecarSets []*v1beta1.SidecarSet
	Namespaces  []*corev1.Namespace
	// ControllerRevisions are not data (no policy reads them): the engine's snapshot hands them to
	// injection, which restores a SidecarSet's older revision from them.
	ControllerRevisions []*appsv1.ControllerRevision
}

// owners indexes SidecarSets by the names they could collide on: container and init container
// names, volume names (grouped by definition digest), and annotation keys they patch with a policy
// other than Retain. The conflict policy looks a SidecarSet's names up here instead of reading every
// other SidecarSet, which keeps validating one SidecarSet against 10,000 others cheap. Owners are
// listed in the order of order, the SidecarSets' names sorted.
func owners(sets map[string]*setPart, order []string) ast.Object {
	names := map[string]map[string][]*ast.Term{"containers": {}, "initContainers": {}, "annotations": {}}
	volumes := map[string]map[string][]*ast.Term{}
	add := func(idx map[string][]*ast.Term, key string, owner *ast.Term) {
		list := idx[key]
		if len(list) > 0 && list[len(list)-1] == owner {
			return // a SidecarSet naming a key twice is one owner
		}
		idx[key] = append(list, owner)
	}
	for _, name := range order {
		p, owner := sets[name], ast.StringTerm(name)
		for _, c := range p.owned.containers {
			add(names["containers"], c, owner)
		}
		for _, c := range p.owned.initContainers {
			add(names["initContainers"], c, owner)
		}
		for _, k := range p.owned.annotations {
			add(names["annotations"], k, owner)
		}
		for _, v := range p.owned.volumes {
			if volumes[v[0]] == nil {
				volumes[v[0]] = map[string][]*ast.Term{}
			}
			add(volumes[v[0]], v[1], owner)
		}
	}
	out := ast.NewObject()
	for kind, idx := range names {
		out.Insert(ast.StringTerm(kind), ast.NewTerm(lists(idx)))
	}
	byName := ast.NewObject()
	for name, byDigest := range volumes {
		byName.Insert(ast.StringTerm(name), ast.NewTerm(lists(byDigest)))
	}
	out.Insert(ast.StringTerm("volumes"), ast.NewTerm(byName))
	return out
}

// collidable lists, as {name: true}, the SidecarSets that could collide with another on a pod: they
// share a container or init container name with another, or a volume name with another definition
// (the match policy's _collide, by owners). Only these can be withheld from a pod, so the match
// policy looks its candidates up here and compares pairs of these alone: most fleets have none,
// and comparing every pair of ten candidates was half of a pod's decision.
func collidable(owners ast.Object) ast.Object {
	out := ast.NewObject()
	mark := func(list ast.Value) {
		if names, ok := list.(*ast.Array); ok && names.Len() > 1 {
			names.Foreach(func(name *ast.Term) { out.Insert(name, ast.InternedTerm(true)) })
		}
	}
	for _, kind := range []string{"containers", "initContainers"} {
		byName, _ := owners.Get(ast.StringTerm(kind)).Value.(ast.Object)
		byName.Foreach(func(_, list *ast.Term) { mark(list.Value) })
	}
	volumes, _ := owners.Get(ast.StringTerm("volumes")).Value.(ast.Object)
	volumes.Foreach(func(_, byDigest *ast.Term) {
		digests, _ := byDigest.Value.(ast.Object)
		if digests.Len() < 2 {
			return
		}
		digests.Foreach(func(_, list *ast.Term) {
			list.Value.(*ast.Array).Foreach(func(name *ast.Term) { out.Insert(name, ast.InternedTerm(true)) })
		})
	})
	return out
}

func lists(idx map[string][]*ast.Term) ast.Object {
	out := ast.NewObject()
	for k, v := range idx {
		out.Insert(ast.StringTerm(k), ast.ArrayTerm(v...))
	}
	return out
}

func regoV1() *int {
	v := ast.RegoV1.Int()
	return &v
}

// contentRevision makes the manifest revision of a data bundle a function of the content only.
func contentRevision(data map[string]any, sources map[string]string) (string, error) {
	h := sha256.New()
	raw, err := json.Marshal(data) // encoding/json sorts map keys: canonical enough for a hash
	if err != nil {
		return "", fmt.Errorf("bundle data: %w", err)
	}
	h.Write(raw)
	for _, path := range slices.Sorted(maps.Keys(sources)) {
		fmt.Fprintf(h, "\x00%s\x00%s", path, sources[path])
	}
	return hex.EncodeToString(h.Sum(nil))[:20], nil
}

// IndexPackage is the package of the generated index module of a compiled bundle.
const IndexPackage = "sidecarops.index"

// IndexModule generates the index module of package pkg from SidecarSets' rules (IndexRules, by
// name), the compiled form of every SidecarSet's own admission test: `matches` holds the names of
// the SidecarSets that admit the pod being decided. The engine compiles a few SidecarSets' rules into
// a module of another package when only they changed.
func IndexModule(pkg string, rules map[string]string) string {
	var b strings.Builder
	b.WriteString("# Code generated by sidecarops bundles.IndexModule. DO NOT EDIT.\n")
	fmt.Fprintf(&b, "package %s\n", pkg)
	for _, name := range slices.Sorted(maps.Keys(rules)) {
		b.WriteString(rules[name])
	}
	b.WriteString(`
# Helpers are functions so that a negated test is a negated call: OPA would otherwise hoist the
# label lookup out of the negation and fail when the label is absent.
_label_in(labels, key, values) if labels[key] in values

_has_label(labels, key) if _ = labels[key]
`)
	return b.String()
}

// IndexRules renders a SidecarSet's own admission test as rules of the index module: `matches`
// rules whose bodies hold its selector, its namespace scope and nothing else, written as Rego over
// the input. Each In expression of the pod selector is split into its values, one rule per
// combination (up to maxSplitRules rules; an In that would pass that stays a test), so that every
// value is an equality. A paused SidecarSet, or one whose selector is unset or empty, gets no rule:
// it never injects (compat §1.3, compat §1.5).
//
// Equality tests between a ground input reference and a constant come first. OPA's rule index turns
// them into a lookup on the pod's labels and namespace, so the decision costs about the same with 10
// or 10,000 SidecarSets, and no SidecarSet document is read per admission: only the rules whose
// equalities all hold are evaluated. The match policy's `applies` states the same judgement over the
// SidecarSet documents; a test proves the two agree.
func IndexRules(ss *v1beta1.SidecarSet) string {
	var b strings.Builder
	for _, body := range indexRules(ss) {
		fmt.Fprintf(&b, "\nmatches contains %s if {\n", quote(ss.Name))
		for _, c := range body {
			fmt.Fprintf(&b, "\t%s\n", c)
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// maxSplitRules bounds the rules one SidecarSet's In expressions are split into: each is evaluated
// only for pods with its values, but every rule costs compile time and memory.
const maxSplitRules = 16

const (
	podLabelsRef       = "input.pod.metadata.labels"
	namespaceLabelsRef = "data.sidecarops.labels.namespace"
	// podLabelsOrEmpty is the pod's labels, {} when it has none. Negated tests read it: an
	// unlabelled pod satisfies NotIn and DoesNotExist, but `not` over the undefined
	// input.pod.metadata.labels of a pod without labels fails. Positive tests keep the input
	// reference, which OPA's rule index looks up.
	podLabelsOrEmpty = "data.sidecarops.labels.pod"
)

// indexRules returns the bodies of the rules to emit for ss; none when ss can never inject.
func indexRules(ss *v1beta1.SidecarSet) [][]string {
	sel := ss.Spec.Selector
	if ss.Spec.InjectionStrategy.Paused || sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return nil
	}
	// The In expressions split into their values, in order, while the rules stay few; the rules'
	// union is the In tests. An In on the namespace's name label is a test of input.namespace: the
	// label is always the namespace's name (bundles writes it so, as the API server does).
	rules := [][]string{nil}
	split := func(e metav1.LabelSelectorRequirement, test func(value string) string) bool {
		if e.Operator != metav1.LabelSelectorOpIn || len(e.Values) == 0 {
			return false
		}
		values := slices.Compact(slices.Sorted(slices.Values(e.Values)))
		if len(rules)*len(values) > maxSplitRules {
			return false
		}
		next := make([][]string, 0, len(rules)*len(values))
		for _, r := range rules {
			for _, v := range values {
				next = append(next, append(slices.Clip(r), test(v)))
			}
		}
		rules = next
		return true
	}
	podSplit := map[int]bool{}
	for i, e := range sel.MatchExpressions {
		podSplit[i] = split(e, func(v string) string { return labelTest(podLabelsRef, e.Key, v) })
	}
	nsSplit := map[int]bool{}
	if ns := ss.Spec.NamespaceSelector; ns != nil {
		for i, e := range ns.MatchExpressions {
			nsSplit[i] = e.Key == v1beta1.NamespaceNameLabel && split(e, func(v string) string { return "input.namespace == " + quote(v) })
		}
	}
	common := append(selectorTerms(sel, podLabelsRef, podSplit), namespaceTerms(ss, nsSplit)...)
	for i := range rules {
		rules[i] = append(rules[i], common...)
	}
	return rules
}

// namespaceTerms compiles the namespace selector but for the expressions split (indexRules). A
// selector on the namespace's name label alone (a v1alpha1 spec.namespace converts into one, and it
// is OpenKruise's usual namespaceSelector) becomes an indexable test of input.namespace; any other
// selector is tested against the namespace's labels.
func namespaceTerms(ss *v1beta1.SidecarSet, split map[int]bool) []string {
	ns := ss.Spec.NamespaceSelector
	if ns == nil {
		return nil
	}
	name, byName := ns.MatchLabels[v1beta1.NamespaceNameLabel]
	if byName && len(ns.MatchLabels) == 1 && len(ns.MatchExpressions) == 0 {
		return []string{"input.namespace == " + quote(name)}
	}
	var terms []string
	if byName {
		terms = append(terms, "input.namespace == "+quote(name))
	}
	return append(terms, selectorTerms(ns, namespaceLabelsRef, split)...)
}

// selectorTerms renders every term of sel as a test on the labels at ref, skipping the expressions
// split (indexRules). The tests follow k8s.io/apimachinery's labels.Requirement.Matches, as
// policies/selector.rego does.
func selectorTerms(sel *metav1.LabelSelector, ref string, split map[int]bool) []string {
	var terms []string
	for _, k := range slices.Sorted(maps.Keys(sel.MatchLabels)) {
		terms = append(terms, labelTest(ref, k, sel.MatchLabels[k]))
	}
	for i, e := range sel.MatchExpressions {
		if split[i] {
			continue
		}
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			terms = append(terms, fmt.Sprintf("_label_in(%s, %s, %s)", ref, quote(e.Key), setLiteral(e.Values)))
		case metav1.LabelSelectorOpNotIn:
			terms = append(terms, fmt.Sprintf("not _label_in(%s, %s, %s)", orEmpty(ref), quote(e.Key), setLiteral(e.Values)))
		case metav1.LabelSelectorOpExists:
			terms = append(terms, fmt.Sprintf("_has_label(%s, %s)", ref, quote(e.Key)))
		case metav1.LabelSelectorOpDoesNotExist:
			terms = append(terms, fmt.Sprintf("not _has_label(%s, %s)", orEmpty(ref), quote(e.Key)))
		default:
			// Validation rejects unknown operators; should one reach here, the SidecarSet fails
			// closed, as the selector library's _holds does.
			terms = append(terms, "false")
		}
	}
	return terms
}

// orEmpty is the labels reference a negated test reads (podLabelsOrEmpty).
func orEmpty(ref string) string {
	if ref == podLabelsRef {
		return podLabelsOrEmpty
	}
	return ref
}

func labelTest(ref, key, value string) string {
	return fmt.Sprintf("%s[%s] == %s", ref, quote(key), quote(value))
}

func setLiteral(values []string) string {
	if len(values) == 0 {
		return "set()"
	}
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = quote(v)
	}
	return "{" + strings.Join(quoted, ", ") + "}"
}

// quote renders a Rego string literal; Rego strings use JSON's escapes.
func quote(s string) string {
	raw, _ := json.Marshal(s)
	return string(raw)
}
