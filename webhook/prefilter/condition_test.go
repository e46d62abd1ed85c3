package prefilter

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/object"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/utils/ptr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/podwebhook"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

// apiServer evaluates a filter with the API server's own code (the object selector matcher; the
// CEL environment, compiler and matcher of match conditions, of k8s.io/apiserver), after checking
// that the API server would accept the condition in a webhook registration.
type apiServer struct {
	webhook webhook.WebhookAccessor
	matcher matchconditions.Matcher // nil without a condition
}

func newAPIServer(t testing.TB, expr string) apiServer {
	return newFilteringAPIServer(t, Filter{Expression: expr})
}

func newFilteringAPIServer(t testing.TB, f Filter) apiServer {
	t.Helper()
	sel := f.Selector
	if sel == nil {
		sel = &metav1.LabelSelector{} // the API server's default
	}
	a := apiServer{webhook: webhook.NewMutatingWebhookAccessor("uid", "sidecarops", &admissionregv1.MutatingWebhook{Name: "mpod.sidecarops.io", ObjectSelector: sel})}
	if f.Selector != nil {
		_, err := a.webhook.GetParsedObjectSelector()
		require.NoError(t, err, "the API server would refuse the object selector %v", f.Selector)
	}
	if f.Expression == "" {
		return a
	}
	envs := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	mc := &matchconditions.MatchCondition{Name: podwebhook.ConditionName, Expression: f.Expression}
	decls := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	// What validation runs when the registration is written.
	res := plugincel.NewCompiler(envs).CompileCELExpression(mc, decls, environment.NewExpressions)
	require.Nil(t, res.Error, "the API server would refuse %s", f.Expression)
	compiler, err := plugincel.NewCompositedCompiler(envs)
	require.NoError(t, err)
	cond := compiler.CompileCondition([]plugincel.ExpressionAccessor{mc}, decls, environment.StoredExpressions)
	a.matcher = matchconditions.NewMatcher(cond, ptr.To(admissionregv1.Fail), "webhook", "admit", "mpod.sidecarops.io")
	return a
}

var (
	podKind     = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	podResource = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// calls says whether the API server would call the webhook for the creation of p in namespace ns:
// the object selector first, then the condition. An evaluation error fails the test: with
// failurePolicy Fail it would refuse the pod.
func (a apiServer) calls(t testing.TB, ns string, p *corev1.Pod) bool {
	t.Helper()
	attrs := admission.NewAttributesRecord(p, nil, podKind, ns, p.Name, podResource, "", admission.Create, &metav1.CreateOptions{}, false, nil)
	selected, serr := new(object.Matcher).MatchObjectSelector(a.webhook, attrs)
	require.Nil(t, serr)
	if !selected || a.matcher == nil {
		return selected
	}
	r := a.matcher.Match(context.Background(), &admission.VersionedAttributes{Attributes: attrs, VersionedKind: podKind, VersionedObject: admission.NewLazyObject(p)}, nil, nil)
	require.NoError(t, r.Error)
	return r.Matches
}

func labelled(labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
}

func sidecarSet(name string, sel *metav1.LabelSelector, mutate ...func(*v1beta1.SidecarSet)) *v1beta1.SidecarSet {
	ss := &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta1.SidecarSetSpec{
			Selector:   sel,
			Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: name, Image: name + ":1"}}},
		},
	}
	for _, m := range mutate {
		m(ss)
	}
	return ss
}

func matchLabels(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func expression(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func TestCondition(t *testing.T) {
	inNamespace := func(ns string) func(*v1beta1.SidecarSet) {
		return func(ss *v1beta1.SidecarSet) { ss.Spec.NamespaceSelector = v1beta1.NamespaceNamed(ns) }
	}
	namespaceSelector := func(sel *metav1.LabelSelector) func(*v1beta1.SidecarSet) {
		return func(ss *v1beta1.SidecarSet) { ss.Spec.NamespaceSelector = sel }
	}
	type admission struct {
		ns     string
		labels map[string]string
		want   bool
	}
	for _, tc := range []struct {
		name string
		sets []*v1beta1.SidecarSet
		// Expected calls, from Kubernetes' label selector semantics (labels.Requirement.Matches)
		// and OpenKruise's injection scope (compat §1.3, compat §1.12).
		admissions []admission
	}{{
		name: "no SidecarSet: no pod is sent",
		admissions: []admission{
			{"default", map[string]string{"app": "web"}, false},
			{"default", nil, false},
		},
	}, {
		name: "matchLabels",
		sets: []*v1beta1.SidecarSet{sidecarSet("a", matchLabels("app", "web", "tier", "front"))},
		admissions: []admission{
			{"default", map[string]string{"app": "web", "tier": "front", "x": "y"}, true},
			{"default", map[string]string{"app": "web"}, false},
			{"default", map[string]string{"app": "db", "tier": "front"}, false},
			{"default", nil, false},
		},
	}, {
		name: "In with several values",
		sets: []*v1beta1.SidecarSet{sidecarSet("a", expression("app", metav1.LabelSelectorOpIn, "web", "api"))},
		admissions: []admission{
			{"default", map[string]string{"app": "api"}, true},
			{"default", map[string]string{"app": "web"}, true},
			{"default", map[string]string{"app": "db"}, false},
			{"default", map[string]string{}, false},
		},
	}, {
		name: "NotIn holds without the label, and on a pod without labels",
		sets: []*v1beta1.SidecarSet{sidecarSet("a", expression("app", metav1.LabelSelectorOpNotIn, "db"))},
		admissions: []admission{
			{"default", map[string]string{"app": "web"}, true},
			{"default", map[string]string{"other": "x"}, true},
			{"default", nil, true},
			{"default", map[string]string{"app": "db"}, false},
		},
	}, {
		name: "Exists and DoesNotExist",
		sets: []*v1beta1.SidecarSet{
			sidecarSet("a", expression("mesh", metav1.LabelSelectorOpExists)),
			sidecarSet("b", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "legacy", Operator: metav1.LabelSelectorOpDoesNotExist}}}),
		},
		admissions: []admission{
			{"default", map[string]string{"mesh": ""}, true},
			{"default", map[string]string{"app": "web"}, true},
			{"default", map[string]string{"app": "web", "legacy": "1"}, false},
			{"default", nil, false},
		},
	}, {
		name: "spec.namespace",
		sets: []*v1beta1.SidecarSet{sidecarSet("a", matchLabels("app", "web"), inNamespace("shop"))},
		admissions: []admission{
			{"shop", map[string]string{"app": "web"}, true},
			{"default", map[string]string{"app": "web"}, false},
		},
	}, {
		name: "namespaceSelector on the name label is exact",
		sets: []*v1beta1.SidecarSet{sidecarSet("a", expression("app", metav1.LabelSelectorOpDoesNotExist),
			namespaceSelector(expression(v1beta1.NamespaceNameLabel, metav1.LabelSelectorOpNotIn, "kube-public", "shop")))},
		admissions: []admission{
			{"default", nil, true},
			{"default", map[string]string{"app": "web"}, false},
			{"shop", nil, false},
		},
	}, {
		name: "namespaceSelector on other labels, invisible to CEL, may match anywhere",
		sets: []*v1beta1.SidecarSet{sidecarSet("a", matchLabels("app", "web"), namespaceSelector(matchLabels("team", "blue")))},
		admissions: []admission{
			{"default", map[string]string{"app": "web"}, true},
			{"default", map[string]string{"app": "db"}, false},
		},
	}, {
		name: "a namespace scope no name satisfies injects nowhere",
		sets: []*v1beta1.SidecarSet{sidecarSet("a", matchLabels("app", "web"), namespaceSelector(expression(v1beta1.NamespaceNameLabel, metav1.LabelSelectorOpDoesNotExist)))},
		admissions: []admission{
			{"default", map[string]string{"app": "web"}, false},
		},
	}, {
		name: "empty, unset and paused SidecarSets inject nowhere",
		sets: []*v1beta1.SidecarSet{
			sidecarSet("a", &metav1.LabelSelector{}),
			sidecarSet("b", nil),
			sidecarSet("c", matchLabels("app", "web"), func(ss *v1beta1.SidecarSet) { ss.Spec.InjectionStrategy.Paused = true }),
		},
		admissions: []admission{
			{"default", map[string]string{"app": "web"}, false},
			{"default", nil, false},
		},
	}, {
		name: "several SidecarSets: any of them",
		sets: []*v1beta1.SidecarSet{
			sidecarSet("a", matchLabels("app", "web"), inNamespace("shop")),
			sidecarSet("b", matchLabels("app", "db")),
			sidecarSet("c", matchLabels("app", "db")), // the same term once
		},
		admissions: []admission{
			{"shop", map[string]string{"app": "web"}, true},
			{"default", map[string]string{"app": "web"}, false},
			{"default", map[string]string{"app": "db"}, true},
		},
	}, {
		name: "values needing escapes",
		sets: []*v1beta1.SidecarSet{sidecarSet("a", matchLabels("example.com/app", `we"b\`))},
		admissions: []admission{
			{"default", map[string]string{"example.com/app": `we"b\`}, true},
			{"default", map[string]string{"example.com/app": "web"}, false},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			expr, filter, reason := Condition(tc.sets)
			require.True(t, filter, reason)
			f, filter, reason := Compile(tc.sets)
			require.True(t, filter, reason)
			api, filtered := newAPIServer(t, expr), newFilteringAPIServer(t, f)
			for _, a := range tc.admissions {
				require.Equal(t, a.want, api.calls(t, a.ns, labelled(a.labels)), "pod %v in %s with %s", a.labels, a.ns, expr)
				require.Equal(t, a.want, filtered.calls(t, a.ns, labelled(a.labels)), "pod %v in %s with %+v", a.labels, a.ns, f)
			}
		})
	}
}

func TestConditionUnfiltered(t *testing.T) {
	_, filter, reason := Condition([]*v1beta1.SidecarSet{sidecarSet("odd", expression("app", "Matches", "w.*"))})
	require.False(t, filter)
	require.Contains(t, reason, `SidecarSet/odd: spec.selector: app: unsupported operator "Matches"`)

	// The largest condition Condition emits still compiles in the API server's CEL environment,
	// within its cost limits, and evaluates.
	fleet := func(n int) []*v1beta1.SidecarSet {
		var sets []*v1beta1.SidecarSet
		for i := range n {
			sets = append(sets, sidecarSet(fmt.Sprint("s", i), matchLabels("app", fmt.Sprintf("application-number-%d", i))))
		}
		return sets
	}
	// The largest fleet that still gets a condition, by bisection.
	lo, hi := 1, 4000
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if _, filter, _ := Condition(fleet(mid)); filter {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	large := fleet(lo)
	t.Logf("%d SidecarSets", lo)
	expr, filter, reason := Condition(large)
	require.True(t, filter, reason)
	require.Greater(t, len(expr), MaxExpressionLength-200)
	api := newAPIServer(t, expr)
	require.True(t, api.calls(t, "default", labelled(map[string]string{"app": fmt.Sprintf("application-number-%d", len(large)-1)})))
	require.False(t, api.calls(t, "default", labelled(map[string]string{"app": "none"})))

	var many []*v1beta1.SidecarSet
	for i := range 3000 {
		many = append(many, sidecarSet(fmt.Sprint("s", i), matchLabels("app", fmt.Sprintf("application-number-%d", i))))
	}
	_, filter, reason = Condition(many)
	require.False(t, filter)
	require.Contains(t, reason, "the condition for 3000 SidecarSets would be")
}

// TestConditionNeverNarrowerThanThePolicies checks Condition against the policies themselves on
// random fleets: whenever the engine injects a SidecarSet into a pod, the API server calls the
// webhook; and where namespace scopes only name namespaces (CEL cannot see other namespace
// labels), it calls it only then. The filter Compile registers instead sends the same pods.
func TestConditionNeverNarrowerThanThePolicies(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	keys, values := []string{"app", "tier", "mesh"}, []string{"a", "b", "c"}
	randLabels := func() map[string]string {
		if rng.IntN(6) == 0 {
			return nil
		}
		l := map[string]string{}
		for _, k := range keys {
			if rng.IntN(2) == 0 {
				l[k] = values[rng.IntN(len(values))]
			}
		}
		return l
	}
	randSelector := func(keys []string) *metav1.LabelSelector {
		s := &metav1.LabelSelector{}
		for range 1 + rng.IntN(2) {
			k := keys[rng.IntN(len(keys))]
			switch op := []metav1.LabelSelectorOperator{"", metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}[rng.IntN(5)]; op {
			case "":
				s.MatchLabels = map[string]string{k: values[rng.IntN(len(values))]}
			case metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn:
				s.MatchExpressions = append(s.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: op, Values: values[:1+rng.IntN(2)]})
			default:
				s.MatchExpressions = append(s.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: op})
			}
		}
		return s
	}
	namespaces := []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{v1beta1.NamespaceNameLabel: "a", "team": "a"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{v1beta1.NamespaceNameLabel: "b", "team": "b"}}},
	}
	for fleet := range 40 {
		// Half the fleets scope namespaces by name only: there the condition must be exact.
		nameOnly := fleet%2 == 0
		nsKeys := []string{v1beta1.NamespaceNameLabel}
		if !nameOnly {
			nsKeys = append(nsKeys, "team")
		}
		var sets []*v1beta1.SidecarSet
		for i := range 1 + rng.IntN(4) {
			ss := sidecarSet(fmt.Sprintf("s%d", i), randSelector(keys))
			switch rng.IntN(3) {
			case 0:
				ss.Spec.NamespaceSelector = v1beta1.NamespaceNamed(namespaces[rng.IntN(2)].Name)
			case 1:
				ss.Spec.NamespaceSelector = randSelector(nsKeys)
			}
			require.NoError(t, defaults.SidecarSetAndHash(ss))
			sets = append(sets, ss)
		}
		snap, err := new(engine.Compiler).Snapshot(context.Background(), bundles.State{SidecarSets: sets, Namespaces: namespaces}, nil)
		require.NoError(t, err)
		expr, filter, reason := Condition(sets)
		require.True(t, filter, reason)
		api := newAPIServer(t, expr)
		f, _, _ := Compile(sets)
		filtered, fromCEL := newFilteringAPIServer(t, f), newAPIServer(t, f.CEL())
		for range 30 {
			p, ns := labelled(randLabels()), namespaces[rng.IntN(2)].Name
			// What is registered sends exactly the pods the condition sends, and reads back alike.
			require.Equal(t, api.calls(t, ns, p), filtered.calls(t, ns, p), "fleet %d: %v in %s:\n%s\n%s\n%+v", fleet, p.Labels, ns, describe(sets), expr, f)
			require.Equal(t, api.calls(t, ns, p), fromCEL.calls(t, ns, p), "fleet %d: %v in %s: CEL of %+v: %s", fleet, p.Labels, ns, f, f.CEL())
			raw, err := json.Marshal(p)
			require.NoError(t, err)
			d, err := snap.Decide(context.Background(), ns, raw)
			require.NoError(t, err)
			injects, called := len(d.Matched) > 0, api.calls(t, ns, p)
			if injects && !called {
				t.Fatalf("fleet %d: %v would be injected in %s but the API server would not call the webhook:\n%s\n%s", fleet, p.Labels, ns, describe(sets), expr)
			}
			if nameOnly && called && !injects {
				t.Fatalf("fleet %d: %v in %s is not injected but the API server would call the webhook:\n%s\n%s", fleet, p.Labels, ns, describe(sets), expr)
			}
		}
	}
}

func describe(sets []*v1beta1.SidecarSet) string {
	var b strings.Builder
	for _, ss := range sets {
		raw, _ := json.Marshal(map[string]any{"selector": ss.Spec.Selector, "namespaceSelector": ss.Spec.NamespaceSelector})
		fmt.Fprintf(&b, "%s: %s\n", ss.Name, raw)
	}
	return b.String()
}

// Compile registers a selector alone exactly where it says all the condition does.
func TestCompile(t *testing.T) {
	in := func(key string, values ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: key, Operator: metav1.LabelSelectorOpIn, Values: values}
	}
	exists := func(key string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: key, Operator: metav1.LabelSelectorOpExists}
	}
	sel := func(rs ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: rs}
	}
	scoped := func(ss *v1beta1.SidecarSet) { ss.Spec.NamespaceSelector = v1beta1.NamespaceNamed("shop") }
	for _, tc := range []struct {
		name      string
		sets      []*v1beta1.SidecarSet
		selector  *metav1.LabelSelector
		condition bool
	}{
		{name: "none: a condition that is false", condition: true},
		{name: "one SidecarSet", sets: []*v1beta1.SidecarSet{sidecarSet("a", matchLabels("tier", "front", "app", "web"))},
			selector: sel(in("app", "web"), in("tier", "front"))},
		{name: "one SidecarSet, every operator", sets: []*v1beta1.SidecarSet{sidecarSet("a", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"db", "cache"}}, {Key: "legacy", Operator: metav1.LabelSelectorOpDoesNotExist}}})},
			selector: sel(metav1.LabelSelectorRequirement{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"cache", "db"}},
				metav1.LabelSelectorRequirement{Key: "legacy", Operator: metav1.LabelSelectorOpDoesNotExist})},
		{name: "the same selector twice", sets: []*v1beta1.SidecarSet{sidecarSet("a", matchLabels("app", "web")), sidecarSet("b", expression("app", metav1.LabelSelectorOpIn, "web"))},
			selector: sel(in("app", "web"))},
		{name: "one label listing values", sets: []*v1beta1.SidecarSet{sidecarSet("a", matchLabels("app", "web")), sidecarSet("b", expression("app", metav1.LabelSelectorOpIn, "db", "api"))},
			selector: sel(in("app", "api", "db", "web"))},
		{name: "paused ones do not count", sets: []*v1beta1.SidecarSet{sidecarSet("a", matchLabels("app", "web")),
			sidecarSet("b", matchLabels("tier", "x"), func(ss *v1beta1.SidecarSet) { ss.Spec.InjectionStrategy.Paused = true })},
			selector: sel(in("app", "web"))},
		{name: "a namespace scope: the condition says it", sets: []*v1beta1.SidecarSet{sidecarSet("a", matchLabels("app", "web"), scoped)},
			selector: sel(in("app", "web")), condition: true},
		{name: "labels each requires: a selector narrowing the condition",
			sets: []*v1beta1.SidecarSet{sidecarSet("a", matchLabels("app", "web", "mesh", "on")), sidecarSet("b", &metav1.LabelSelector{
				MatchLabels: map[string]string{"app": "db"}, MatchExpressions: []metav1.LabelSelectorRequirement{exists("mesh")}})},
			selector: sel(in("app", "db", "web"), exists("mesh")), condition: true},
		{name: "nothing all require: the condition alone", sets: []*v1beta1.SidecarSet{sidecarSet("a", matchLabels("app", "web")), sidecarSet("b", matchLabels("tier", "x"))},
			condition: true},
		{name: "a value no label can have: the condition alone", sets: []*v1beta1.SidecarSet{sidecarSet("a", matchLabels("app", `we"b`))},
			condition: true},
		{name: "one without labels: the condition alone", sets: []*v1beta1.SidecarSet{sidecarSet("a", matchLabels("app", "web")), sidecarSet("b", expression("app", metav1.LabelSelectorOpNotIn, "x"))},
			condition: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, filter, reason := Compile(tc.sets)
			require.True(t, filter, reason)
			require.Equal(t, tc.selector, f.Selector)
			require.Equal(t, tc.condition, f.Expression != "", "condition %q", f.Expression)
			if tc.condition {
				expr, _, _ := Condition(tc.sets)
				require.Equal(t, expr, f.Expression, "the condition is Condition's")
			}
		})
	}
	_, filter, reason := Compile([]*v1beta1.SidecarSet{sidecarSet("odd", expression("app", "Matches", "w.*"))})
	require.False(t, filter)
	require.Contains(t, reason, "unsupported operator")
}
