package bundles

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/policies"
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
	SidecarSets         []*v1beta1.SidecarSet
	Namespaces          []*corev1.Namespace
	ControllerRevisions []*appsv1.ControllerRevision
}

// Compile builds the bundle of a State: data, the embedded static policies and the generated index.
// Modules are parsed here, once, so that loading the bundle into the engine only compiles.
func Compile(st State) (*bundle.Bundle, error) {
	sets := make(map[string]any, len(st.SidecarSets))
	canaries := map[string]any{}
	for _, ss := range st.SidecarSets {
		if base, ok := canaryBase(ss); ok {
			canaries[ss.Name] = base
		}
		if _, dup := sets[ss.Name]; dup {
			return nil, fmt.Errorf("SidecarSet/%s: metadata.name: duplicate SidecarSet name", ss.Name)
		}
		doc, err := Normalize(ss)
		if err != nil {
			return nil, err
		}
		sets[ss.Name] = doc
	}
	ownerIndex, err := owners(st.SidecarSets)
	if err != nil {
		return nil, err
	}
	namespaces := make(map[string]any, len(st.Namespaces))
	for _, ns := range st.Namespaces {
		namespaces[ns.Name] = namespaceDoc(ns)
	}
	revs := make(map[string]any, len(st.ControllerRevisions))
	for _, cr := range st.ControllerRevisions {
		revs[cr.Name] = revisionDoc(cr)
	}
	data := map[string]any{Root: map[string]any{"state": map[string]any{
		"sidecarsets": sets,
		"namespaces":  namespaces,
		"revisions":   revs,
		"owners":      ownerIndex,
		"canaries":    canaries,
	}}}

	sources := policies.Modules()
	sources[IndexModulePath] = IndexModule(st.SidecarSets)

	b := &bundle.Bundle{
		Manifest: bundle.Manifest{Roots: &[]string{Root}, RegoVersion: regoV1()},
		Data:     data,
	}
	for _, path := range slices.Sorted(maps.Keys(sources)) {
		parsed, err := ast.ParseModuleWithOpts(path, sources[path], ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, fmt.Errorf("bundle module %s: %w", path, err)
		}
		b.Modules = append(b.Modules, bundle.ModuleFile{
			URL: "/" + path, Path: "/" + path, RelativePath: path, Raw: []byte(sources[path]), Parsed: parsed,
		})
	}
	rev, err := contentRevision(data, sources)
	if err != nil {
		return nil, err
	}
	b.Manifest.Revision = rev
	return b, nil
}

// owners indexes SidecarSets by the names they could collide on: container and init container
// names, volume names (grouped by definition digest), and annotation keys they patch with a policy
// other than Retain. The conflict policy looks a SidecarSet's names up here instead of reading every
// other SidecarSet, which keeps validating one SidecarSet against 10,000 others cheap.
func owners(sets []*v1beta1.SidecarSet) (map[string]any, error) {
	names := map[string]map[string][]any{"containers": {}, "initContainers": {}, "annotations": {}}
	volumes := map[string]map[string][]any{}
	add := func(idx map[string][]any, key, owner string) {
		list := idx[key]
		if len(list) > 0 && list[len(list)-1] == owner {
			return // a SidecarSet naming a key twice is one owner
		}
		idx[key] = append(list, owner)
	}
	for _, ss := range sets {
		for _, c := range ss.Spec.Containers {
			add(names["containers"], c.Name, ss.Name)
		}
		for _, c := range ss.Spec.InitContainers {
			add(names["initContainers"], c.Name, ss.Name)
		}
		for i := range ss.Spec.Volumes {
			digest, err := volumeDigest(&ss.Spec.Volumes[i])
			if err != nil {
				return nil, fmt.Errorf("SidecarSet/%s: spec.volumes[%d]: %w", ss.Name, i, err)
			}
			name := ss.Spec.Volumes[i].Name
			if volumes[name] == nil {
				volumes[name] = map[string][]any{}
			}
			add(volumes[name], digest, ss.Name)
		}
		for _, p := range ss.Spec.PatchPodMetadata {
			if p.PatchPolicy == v1beta1.SidecarSetRetainPatchPolicy {
				continue
			}
			for _, k := range slices.Sorted(maps.Keys(p.Annotations)) {
				add(names["annotations"], k, ss.Name)
			}
		}
	}
	out := make(map[string]any, len(names)+1)
	for kind, idx := range names {
		out[kind] = generic(idx)
	}
	byName := make(map[string]any, len(volumes))
	for name, byDigest := range volumes {
		byName[name] = generic(byDigest)
	}
	out["volumes"] = byName
	return out, nil
}

func generic(idx map[string][]any) map[string]any {
	out := make(map[string]any, len(idx))
	for k, v := range idx {
		out[k] = v
	}
	return out
}

func regoV1() *int {
	v := ast.RegoV1.Int()
	return &v
}

// contentRevision makes the manifest revision a function of the content only, so identical state
// compiles to an identical revision on every replica and across restarts.
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

// IndexModule generates package sidecarops.index, the compiled form of every SidecarSet's own
// admission test: one `matches` rule per SidecarSet (one per value of its first In expression when it
// has no matchLabels) whose body holds its selector, its namespace scope and nothing else, written
// as Rego over the input. A paused SidecarSet, or one whose selector is unset or empty, gets no rule:
// it never injects (compat §1.3, compat §1.5).
//
// Equality tests between a ground input reference and a constant come first. OPA's rule index turns
// them into a lookup on the pod's labels and namespace, so the decision costs about the same with 10
// or 10,000 SidecarSets, and no SidecarSet document is read per admission. The match policy's
// `applies` states the same judgement over the SidecarSet documents; a test proves the two agree.
func IndexModule(sets []*v1beta1.SidecarSet) string {
	sorted := append([]*v1beta1.SidecarSet(nil), sets...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })

	var b strings.Builder
	b.WriteString("# Code generated by sidecarops bundles.IndexModule. DO NOT EDIT.\n")
	b.WriteString("package sidecarops.index\n")
	for _, ss := range sorted {
		for _, body := range indexRules(ss) {
			fmt.Fprintf(&b, "\nmatches contains %s if {\n", quote(ss.Name))
			for _, c := range body {
				fmt.Fprintf(&b, "\t%s\n", c)
			}
			b.WriteString("}\n")
		}
	}
	b.WriteString(`
# Helpers are functions so that a negated test is a negated call: OPA would otherwise hoist the
# label lookup out of the negation and fail when the label is absent.
_label_in(labels, key, values) if labels[key] in values

_has_label(labels, key) if _ = labels[key]
`)
	return b.String()
}

const (
	podLabelsRef       = "input.pod.metadata.labels"
	namespaceLabelsRef = "data.sidecarops.match.namespace_labels"
	// podLabelsOrEmpty is the pod's labels, {} when it has none. Negated tests read it: an
	// unlabelled pod satisfies NotIn and DoesNotExist, but `not` over the undefined
	// input.pod.metadata.labels of a pod without labels fails. Positive tests keep the input
	// reference, which OPA's rule index looks up.
	podLabelsOrEmpty = "data.sidecarops.match.pod_labels"
)

// indexRules returns the bodies of the rules to emit for ss; none when ss can never inject.
func indexRules(ss *v1beta1.SidecarSet) [][]string {
	sel := ss.Spec.Selector
	if ss.Spec.InjectionStrategy.Paused || sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return nil
	}
	// The first In expression of a selector without matchLabels is split into one rule per value,
	// each an indexable equality; the rules' union is the In test.
	split := -1
	if len(sel.MatchLabels) == 0 {
		for i, e := range sel.MatchExpressions {
			if e.Operator == metav1.LabelSelectorOpIn && len(e.Values) > 0 {
				split = i
				break
			}
		}
	}
	common := append(selectorTerms(sel, podLabelsRef, split), namespaceTerms(ss)...)
	if split < 0 {
		return [][]string{common}
	}
	e := sel.MatchExpressions[split]
	values := append([]string(nil), e.Values...)
	sort.Strings(values)
	var rules [][]string
	for i, v := range values {
		if i > 0 && v == values[i-1] {
			continue
		}
		rules = append(rules, append([]string{labelTest(podLabelsRef, e.Key, v)}, common...))
	}
	return rules
}

// namespaceTerms compiles the namespace selector. A selector on the namespace's name label alone
// (a v1alpha1 spec.namespace converts into one, and it is OpenKruise's usual namespaceSelector)
// becomes an indexable test of input.namespace; any other selector is tested against the
// namespace's labels.
func namespaceTerms(ss *v1beta1.SidecarSet) []string {
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
	return append(terms, selectorTerms(ns, namespaceLabelsRef, -1)...)
}

// selectorTerms renders every term of sel as a test on the labels at ref, skipping expression skip.
// The tests follow k8s.io/apimachinery's labels.Requirement.Matches, as policies/selector.rego does.
func selectorTerms(sel *metav1.LabelSelector, ref string, skip int) []string {
	var terms []string
	for _, k := range slices.Sorted(maps.Keys(sel.MatchLabels)) {
		terms = append(terms, labelTest(ref, k, sel.MatchLabels[k]))
	}
	for i, e := range sel.MatchExpressions {
		if i == skip {
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
