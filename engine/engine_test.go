package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/internal/testing/testfiles"
)

func sidecarSet(name string, matchLabels map[string]string, mutate ...func(*v1beta1.SidecarSet)) *v1beta1.SidecarSet {
	ss := &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: matchLabels},
			Containers: []v1beta1.SidecarContainer{{}},
		},
	}
	ss.Spec.Containers[0].Name = name + "-c"
	ss.Spec.Containers[0].Image = "busybox"
	for _, m := range mutate {
		m(ss)
	}
	return ss
}

// adminBundle writes files into a directory bundle and reads it back like an administrator's bundle.
func adminBundle(t *testing.T, files map[string]string) *bundle.Bundle {
	t.Helper()
	dir := t.TempDir()
	testfiles.Write(t, dir, files)
	b, err := bundles.Read(dir, nil)
	require.NoError(t, err)
	return b
}

func snapshot(t *testing.T, st bundles.State, admin ...*bundle.Bundle) *Snapshot {
	t.Helper()
	s, err := new(Compiler).Snapshot(context.Background(), st, admin)
	require.NoError(t, err)
	return s
}

func podJSON(t *testing.T, ns string, labels map[string]string, mutate ...func(*corev1.Pod)) []byte {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	for _, m := range mutate {
		m(p)
	}
	raw, err := json.Marshal(p)
	require.NoError(t, err)
	return raw
}

var gates = map[string]string{
	".manifest": `{"revision":"gates-1","roots":["gates"]}`,
	"gates/gates.rego": `package gates

deny_injection contains "hostNetwork pods are not injected" if input.pod.spec.hostNetwork
deny_injection contains sprintf("namespace %s is a system namespace", [input.namespace]) if input.namespace == "kube-system"
`,
}

func TestDecide(t *testing.T) {
	st := bundles.State{SidecarSets: []*v1beta1.SidecarSet{
		sidecarSet("zeta", map[string]string{"app": "web"}),
		sidecarSet("alpha", map[string]string{"app": "web"}),
		sidecarSet("paused", map[string]string{"app": "web"}, func(ss *v1beta1.SidecarSet) { ss.Spec.InjectionStrategy.Paused = true }),
		sidecarSet("api-only", map[string]string{"app": "api"}),
		sidecarSet("canary", map[string]string{"app": "web", "track": "canary"}, func(ss *v1beta1.SidecarSet) {
			ss.Annotations = map[string]string{v1beta1.SidecarSetCanaryAnnotation: "true", v1beta1.SidecarSetBaseAnnotation: "alpha"}
		}),
		sidecarSet("prod-ns", map[string]string{"app": "web"}, func(ss *v1beta1.SidecarSet) {
			ss.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
		}),
	}, Namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"env": "prod"}}}}}
	s := snapshot(t, st, adminBundle(t, gates))
	ctx := context.Background()

	cases := []struct {
		name        string
		ns          string
		labels      map[string]string
		hostNetwork bool
		matched     []string
		denied      []string
	}{
		{"by name, paused skipped, namespace selector honoured", "shop", map[string]string{"app": "web"}, false, []string{"alpha", "prod-ns", "zeta"}, nil},
		{"namespace without the label", "dev", map[string]string{"app": "web"}, false, []string{"alpha", "zeta"}, nil},
		{"canary displaces its base", "dev", map[string]string{"app": "web", "track": "canary"}, false, []string{"canary", "zeta"}, nil},
		{"nothing matches", "dev", map[string]string{"app": "db"}, false, nil, nil},
		{"gate vetoes the pod", "dev", map[string]string{"app": "web"}, true, nil, []string{"hostNetwork pods are not injected"}},
		{"two gates, sorted", "kube-system", map[string]string{"app": "web"}, true, nil, []string{"hostNetwork pods are not injected", "namespace kube-system is a system namespace"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := s.Decide(ctx, tc.ns, podJSON(t, tc.ns, tc.labels, func(p *corev1.Pod) { p.Spec.HostNetwork = tc.hostNetwork }))
			require.NoError(t, err)
			assert.Equal(t, tc.matched, nilIfEmpty(d.MatchedNames()))
			assert.Equal(t, tc.denied, nilIfEmpty(d.Denied))
			assert.Equal(t, s.Revision(), d.Revision)
			for _, ss := range d.Matched {
				assert.Same(t, mustGet(t, s, ss.Name), ss, "the snapshot hands out the very objects it was built from")
			}
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func mustGet(t *testing.T, s *Snapshot, name string) *v1beta1.SidecarSet {
	ss, ok := s.SidecarSet(name)
	require.True(t, ok)
	return ss
}

func TestExplain(t *testing.T) {
	s := snapshot(t, bundles.State{SidecarSets: []*v1beta1.SidecarSet{
		sidecarSet("web", map[string]string{"app": "web"}),
		sidecarSet("api", map[string]string{"app": "api"}),
	}})
	got, err := s.Explain(context.Background(), "dev", podJSON(t, "dev", map[string]string{"app": "web"}))
	require.NoError(t, err)
	assert.Equal(t, []string{"matches"}, got["web"])
	require.Len(t, got["api"], 1)
	assert.Contains(t, got["api"][0], "app=api")
}

func TestConflictsAndWhitelist(t *testing.T) {
	existing := sidecarSet("existing", map[string]string{"app": "web"}, func(ss *v1beta1.SidecarSet) {
		ss.Spec.Containers[0].Name = "proxy"
	})
	s := snapshot(t, bundles.State{SidecarSets: []*v1beta1.SidecarSet{existing}}, adminBundle(t, map[string]string{
		".manifest":           `{"revision":"wl-1","roots":["whitelist"]}`,
		"whitelist/data.json": `{"rules":[{"allowedAnnotationKeyExprs":["^allowed\\.example\\.com/"]}]}`,
	}))
	ctx := context.Background()

	candidate := sidecarSet("new", map[string]string{"app": "web"}, func(ss *v1beta1.SidecarSet) {
		ss.Spec.Containers[0].Name = "proxy"
		ss.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{
			Annotations: map[string]string{"allowed.example.com/x": "1", "other.example.com/y": "2"},
			PatchPolicy: v1beta1.SidecarSetRetainPatchPolicy,
		}}
	})
	conflicts, err := s.Conflicts(ctx, candidate)
	require.NoError(t, err)
	require.Len(t, conflicts, 1)
	assert.Equal(t, "existing", conflicts[0].Other)
	assert.Equal(t, "spec.containers[0].name", conflicts[0].Field)
	assert.Equal(t, "container proxy already exist in existing", conflicts[0].Message)
	assert.Equal(t, `spec.containers[0].name: Invalid value: "proxy": container proxy already exist in existing`, conflicts[0].FieldError().Error())

	denied, err := s.Whitelist(ctx, candidate)
	require.NoError(t, err)
	require.Len(t, denied, 1)
	assert.Contains(t, denied[0].Field, "other.example.com/y")
	assert.Contains(t, denied[0].Message, "other.example.com/y")
}

func TestCompilerRefusesOverlappingRoots(t *testing.T) {
	hijack := adminBundle(t, map[string]string{
		".manifest":               `{"revision":"x","roots":["sidecarops/index"]}`,
		"sidecarops/index/x.rego": "package sidecarops.index\n\ncandidates contains \"evil\"\n",
	})
	_, err := new(Compiler).Snapshot(context.Background(), bundles.State{}, []*bundle.Bundle{hijack})
	require.ErrorContains(t, err, `root "sidecarops/index" overlaps root "sidecarops"`)
}

// Concurrent decisions while snapshots are swapped: run with -race.
func TestConcurrentDecideAndSwap(t *testing.T) {
	var e Engine
	ctx := context.Background()
	mk := func(names ...string) *Snapshot {
		var sets []*v1beta1.SidecarSet
		for _, n := range names {
			sets = append(sets, sidecarSet(n, map[string]string{"app": "web"}))
		}
		return snapshot(t, bundles.State{SidecarSets: sets})
	}
	one, two := mk("a"), mk("a", "b")
	e.Swap(one)
	pod := podJSON(t, "dev", map[string]string{"app": "web"})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				d, err := e.Current().Decide(ctx, "dev", pod)
				if !assert.NoError(t, err) {
					return
				}
				n := len(d.Matched)
				assert.True(t, n == 1 || n == 2, "a decision sees one whole snapshot, got %v", d.MatchedNames())
			}
		}()
	}
	for i := 0; i < 20; i++ {
		e.Swap([2]*Snapshot{one, two}[i%2])
	}
	wg.Wait()
}

// The fast JSON conversion must give exactly what OPA's own decoder gives.
func TestInputMatchesOPADecoding(t *testing.T) {
	docs := []string{
		`{"metadata":{"name":"p","labels":{"a":"b","esc\"aped":"\u00e9\n"},"annotations":{}},"spec":{"hostNetwork":true,"n":[1,2.5,-3e2,12345678901234567890],"x":null,"y":false,"e":[],"o":{"k":[{"z":1}]}}}`,
		`{}`,
		`{"a":1,"b":[[],[{}]],"a":{"c":[1,1]}}`, // a repeated key: the last one wins, as in encoding/json
	}
	for _, doc := range docs {
		got, err := input(&projection{all: true}, "ns", []byte(doc))
		require.NoError(t, err)
		want, err := ast.ValueFromReader(strings.NewReader(doc))
		require.NoError(t, err)
		assert.Equal(t, 0, ast.Compare(want, got.(ast.Object).Get(ast.StringTerm("pod")).Value), doc)
	}
	// The last is nested a million levels deep: refused, where a recursive validator would first
	// grow the stack by about 100 MiB (and a deeper one crash the process).
	deep := strings.Repeat(`{"a":`, 1_000_000) + `1` + strings.Repeat(`}`, 1_000_000)
	for _, bad := range []string{``, `{`, `[1]`, `"pod"`, `{"a":}`, deep} {
		_, err := input(&projection{all: true}, "ns", []byte(bad))
		assert.Error(t, err, bad[:min(len(bad), 20)])
	}
}

func TestPodProjection(t *testing.T) {
	pod := `{"metadata":{"name":"p","labels":{"app":"web","a.b":"c"},"annotations":{"x":"1"}},"spec":{"hostNetwork":true,"containers":[{"name":"app"}]},"status":{"phase":"Pending"}}`
	cases := []struct {
		name string
		srcs []string
		want string // the projected pod as JSON
	}{
		{"labels only", []string{`package p
x if input.pod.metadata.labels["a.b"] == "c"
y if input.namespace == "n"`}, `{"metadata":{"labels":{"a.b":"c"}}}`},
		{"a key with dots is one key", []string{`package p
x if input.pod.metadata.labels["a.b"] == "c"
y if input.pod.metadata["labels"]["app"]`}, `{"metadata":{"labels":{"app":"web","a.b":"c"}}}`},
		{"several policies", []string{`package p
x if input.pod.metadata.labels.app`, `package gates
deny contains "h" if input.pod.spec.hostNetwork`}, `{"metadata":{"labels":{"app":"web"}},"spec":{"hostNetwork":true}}`},
		{"iteration takes the subtree", []string{`package p
x if input.pod.spec.containers[_].name == "app"`}, `{"spec":{"containers":[{"name":"app"}]}}`},
		{"absent paths are absent", []string{`package p
x if input.pod.metadata.ownerReferences[0].kind`}, `{"metadata":{}}`},
		{"whole pod", []string{`package p
x if count(input.pod) > 0`}, pod},
		{"whole input", []string{`package p
x if input`}, pod},
		{"computed key", []string{`package p
x if input[input.namespace]`}, pod},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := []byte(pod)
			got, err := input(podProjection(nil, modules(tc.srcs...)), "n", raw)
			require.NoError(t, err)
			// The pod's JSON is read in place: the input must not point into it, since the
			// caller's buffer outlives neither the request nor a decision kept in a cache.
			copy(raw, bytes.Repeat([]byte{'#'}, len(raw)))
			want, err := ast.ValueFromReader(strings.NewReader(tc.want))
			require.NoError(t, err)
			assert.Equal(t, want.String(), got.(ast.Object).Get(ast.StringTerm("pod")).Value.String())
		})
	}
}

// With the gates of an administrator's bundle loaded, what they read is in the input.
func TestProjectionFollowsAdminPolicies(t *testing.T) {
	st := bundles.State{SidecarSets: []*v1beta1.SidecarSet{sidecarSet("a", map[string]string{"app": "web"})}}
	plain := snapshot(t, st)
	gated := snapshot(t, st, adminBundle(t, gates))
	raw := podJSON(t, "dev", map[string]string{"app": "web"}, func(p *corev1.Pod) { p.Spec.HostNetwork = true })
	in, err := plain.Input("dev", raw)
	require.NoError(t, err)
	assert.NotContains(t, in.String(), "hostNetwork", "our policies never read the pod spec")
	in, err = gated.Input("dev", raw)
	require.NoError(t, err)
	assert.Contains(t, in.String(), `"hostNetwork": true`)
}

// Volumes and annotation keys reach the conflict policy through the owners index bundles builds.
func TestConflictsThroughOwnersIndex(t *testing.T) {
	hostPath := func(name, path string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}
	}
	existing := sidecarSet("existing", map[string]string{"app": "web"}, func(ss *v1beta1.SidecarSet) {
		ss.Spec.Volumes = []corev1.Volume{hostPath("same", "/same"), hostPath("differs", "/a")}
		ss.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{
			Annotations: map[string]string{"fought": "1", "merged": "{}"}, PatchPolicy: v1beta1.SidecarSetOverwritePatchPolicy}}
	})
	unrelated := sidecarSet("unrelated", map[string]string{"app": "db"}, func(ss *v1beta1.SidecarSet) {
		ss.Spec.Volumes = []corev1.Volume{hostPath("differs", "/z")}
	})
	s := snapshot(t, bundles.State{SidecarSets: []*v1beta1.SidecarSet{existing, unrelated}})
	candidate := sidecarSet("new", map[string]string{"app": "web"}, func(ss *v1beta1.SidecarSet) {
		ss.Spec.Volumes = []corev1.Volume{hostPath("same", "/same"), hostPath("differs", "/b")}
		ss.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{
			{Annotations: map[string]string{"untouched": "x"}, PatchPolicy: v1beta1.SidecarSetOverwritePatchPolicy},
			{Annotations: map[string]string{"fought": "{}"}, PatchPolicy: v1beta1.SidecarSetMergePatchJsonPatchPolicy},
		}
	})
	got, err := s.Conflicts(context.Background(), candidate)
	require.NoError(t, err)
	var lines []string
	for _, v := range got {
		lines = append(lines, v.FieldError().Error())
	}
	assert.ElementsMatch(t, []string{
		`spec.volumes[1]: Invalid value: "differs": volume differs is in conflict with sidecarset existing`,
		`spec.patchPodMetadata[1].annotations[fought]: Invalid value: "fought": annotation fought is in conflict with sidecarset existing`,
	}, lines, "identical 'same' is shared; 'unrelated' selects other pods")
}

// A policy calling a non-deterministic builtin, in an administrators' bundle too, makes the
// snapshot non-deterministic, whether the call is an expression of its own or nested in one.
func TestDeterministic(t *testing.T) {
	st := bundles.State{SidecarSets: []*v1beta1.SidecarSet{sidecarSet("a", map[string]string{"app": "web"})}}
	assert.True(t, snapshot(t, st).Deterministic(), "our own policies")
	assert.True(t, snapshot(t, st, adminBundle(t, gates)).Deterministic(), "gates reading the pod")
	for _, body := range []string{
		`deny_injection contains "late" if time.now_ns() > 0`,
		`deny_injection contains "unlucky" if rand.intn("gate", 10) == 0`,
		`deny_injection contains "remote" if http.send({"method": "GET", "url": "http://127.0.0.1:1"}).status_code == 500`,
		`deny_injection contains sprintf("id %s", [uuid.rfc4122("x")]) if input.pod.metadata.labels.block`,
	} {
		t.Run(body, func(t *testing.T) {
			admin := adminBundle(t, map[string]string{
				".manifest":        `{"revision":"gates-1","roots":["gates"]}`,
				"gates/gates.rego": "package gates\n\n" + body + "\n",
			})
			assert.False(t, snapshot(t, st, admin).Deterministic())
		})
	}
}

func TestReadsPod(t *testing.T) {
	st := bundles.State{SidecarSets: []*v1beta1.SidecarSet{sidecarSet("a", map[string]string{"app": "web"})}}
	plain, gated := snapshot(t, st), snapshot(t, st, adminBundle(t, gates))
	for _, tc := range []struct {
		path         []string
		plain, gated bool
	}{
		{path: []string{"metadata", "labels"}, plain: true, gated: true},
		{path: []string{"metadata", "labels", "any"}, plain: true, gated: true},
		{path: []string{"metadata"}, plain: true, gated: true},
		{path: []string{"metadata", "name"}},
		{path: []string{"metadata", "uid"}},
		{path: []string{"spec", "hostNetwork"}, gated: true},
	} {
		assert.Equal(t, tc.plain, plain.ReadsPod(tc.path...), "our policies, %v", tc.path)
		assert.Equal(t, tc.gated, gated.ReadsPod(tc.path...), "with gates, %v", tc.path)
	}
}

// A decision whose request goes away stops evaluating: an administrator's gate that would run for
// minutes ends with the request's context, with OPA's cancellation error.
func TestDecideStopsWithItsContext(t *testing.T) {
	st := bundles.State{SidecarSets: []*v1beta1.SidecarSet{sidecarSet("a", map[string]string{"app": "web"})}}
	slow := snapshot(t, st, adminBundle(t, map[string]string{
		".manifest": `{"revision":"gates-1","roots":["gates"]}`,
		"gates/gates.rego": `package gates

deny_injection contains "never" if {
	some i in numbers.range(1, 1000000000)
	i < 0
}
`,
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := slow.Decide(ctx, "default", podJSON(t, "default", map[string]string{"app": "web"}))
	var tErr *topdown.Error
	require.ErrorAs(t, err, &tErr, "evaluated to the end")
	assert.Equal(t, topdown.CancelErr, tErr.Code)
}

// TestDecisionValue covers reading the match policy's value in every shape it could take, the
// malformed ones included: the policy is ours, but a reader that trusted it would panic or
// inject the wrong SidecarSets if it ever changed shape. Each value is read twice, the second
// time after the same value, whose matched lists the snapshot then shares (matchedLists).
func TestDecisionValue(t *testing.T) {
	a, b := sidecarSet("a", nil), sidecarSet("b", nil)
	s := &Snapshot{revision: "r1"}
	s.setObjects([]*v1beta1.SidecarSet{a, b}, nil)
	for _, tc := range []struct {
		name, value string // value "" is undefined
		want        Decision
		err         string
	}{
		{name: "undefined", want: Decision{Revision: "r1"}},
		{name: "matched in order", value: `{"matched": ["b", "a"], "denied": [], "withheld": []}`,
			want: Decision{Revision: "r1", Matched: []*v1beta1.SidecarSet{b, a}, Denied: []string{}}},
		{name: "sets read sorted", value: `{"matched": {"b", "a"}}`,
			want: Decision{Revision: "r1", Matched: []*v1beta1.SidecarSet{a, b}}},
		{name: "denied", value: `{"matched": [], "denied": ["no", "never"], "withheld": []}`,
			want: Decision{Revision: "r1", Denied: []string{"no", "never"}}},
		{name: "withheld", value: `{"matched": ["a"], "denied": [], "withheld": [["b", "a"]]}`,
			want: Decision{Revision: "r1", Matched: []*v1beta1.SidecarSet{a}, Denied: []string{},
				Withheld: []Withheld{{SidecarSet: "b", CollidesWith: "a"}}}},
		{name: "not an object", value: `["a"]`, err: `want an object, got ["a"]`},
		{name: "matched not a list", value: `{"matched": "a"}`, err: `decision."matched": want an array, got "a"`},
		{name: "matched not strings", value: `{"matched": [1]}`, err: `decision."matched": want strings, got 1`},
		{name: "denied not strings", value: `{"denied": [{"a": 1}]}`, err: `decision."denied": want strings`},
		{name: "withheld not pairs", value: `{"withheld": [["b"]]}`, err: `withheld: want [name, name] pairs, got ["b"]`},
		{name: "withheld not names", value: `{"withheld": [["b", 2]]}`, err: `withheld: want [name, name] pairs`},
		{name: "unknown SidecarSet", value: `{"matched": ["c"]}`, err: `policy matched SidecarSet "c" that the snapshot does not hold`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var term *ast.Term
			if tc.value != "" {
				term = ast.MustParseTerm(tc.value)
			}
			for range 2 {
				got, err := s.decision(term)
				if tc.err != "" {
					require.ErrorContains(t, err, tc.err)
					continue
				}
				require.NoError(t, err)
				assert.Equal(t, tc.want.MatchedNames(), got.MatchedNames())
				got.names = nil
				assert.Equal(t, tc.want, got)
			}
		})
	}
}
