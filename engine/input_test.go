package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
)

// modules parses Rego v1 sources as modules.
func modules(srcs ...string) map[string]*ast.Module {
	out := map[string]*ast.Module{}
	for i, src := range srcs {
		out[fmt.Sprint(i)] = ast.MustParseModuleWithOpts(src, ast.ParserOptions{RegoVersion: ast.RegoV1})
	}
	return out
}

// decodePod decodes a pod as the webhook does (webhook.decodeObject: JSON v2, invalid UTF-8
// replaced, duplicate names refused, names told apart by case).
func decodePod(raw []byte) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	return pod, jsonv2.Unmarshal(raw, pod, jsontext.AllowInvalidUTF8(true))
}

// typedProjections are projections typedInput builds, read by policies as ours and the
// administrators' gates read pods.
func typedProjections(t *testing.T) map[string]*projection {
	t.Helper()
	st := bundles.State{SidecarSets: []*v1beta1.SidecarSet{sidecarSet("a", map[string]string{"app": "web"})}}
	examples, err := bundles.Read("../examples/policies", nil)
	require.NoError(t, err)
	return map[string]*projection{
		"ours":                      snapshot(t, st).podProjection,
		"ours and example gates":    snapshot(t, st, examples).podProjection,
		"some keys of labels":       podProjection(nil, modules("package p\nx if input.pod.metadata.labels.app\ny if input.pod.metadata.labels[\"a/b\"]")),
		"some keys of annotations":  podProjection(nil, modules("package p\nx if input.pod.metadata.annotations[\"a/b\"]")),
		"name and generateName":     podProjection(nil, modules("package p\nx if input.pod.metadata.name\ny if input.pod.metadata.generateName")),
		"hostNetwork alone":         podProjection(nil, modules("package p\nx if input.pod.spec.hostNetwork")),
		"every field typed":         podProjection(nil, modules("package p\nx if input.pod.spec.hostNetwork", "package q\nx := input.pod.metadata.labels", "package r\nx := input.pod.metadata.annotations", "package s\nx := [input.pod.metadata.name, input.pod.metadata.generateName]")),
		"below a string or boolean": podProjection(nil, modules("package p\nx if input.pod.metadata.name.x\ny if input.pod.spec.hostNetwork[0]")),
	}
}

// The projections of our policies, alone and with the gates of examples/policies, are built from
// the decoded pod on the webhook's path (Snapshot.DecideDecoded). If this fails, a policy reads a
// pod field typedInput does not build: every pod's input is then converted from its JSON, which
// costs more (BenchmarkPerPod). Add the field to typedParents, with its absent, null and empty
// cases to TestTypedInput's pods, unless the cost is accepted.
func TestTypedProjection(t *testing.T) {
	for name, proj := range typedProjections(t) {
		assert.True(t, proj.typed, name)
	}
	for _, src := range []string{
		"package p\nx if input.pod.metadata",
		"package p\nx if input.pod.metadata.namespace", // which the caller may have defaulted
		"package p\nx if input.pod.spec.containers[_].name",
		"package p\nx if input.pod.status",
		"package p\nx if input.pod",
		"package p\nx if input[input.namespace]",
	} {
		proj := podProjection(nil, modules(src))
		assert.False(t, proj.typed, src)
		_, ok := typedInput(proj, "ns", &corev1.Pod{}, []byte(`{}`))
		assert.False(t, ok, src)
	}
}

// Where typedInput builds the input from a decoded pod, it is exactly what decodedInput converts
// from the pod's JSON: absent, null and empty fields, escaped names, invalid UTF-8, and pods
// marshalled by json.Marshal (injector.Pod's, without the JSON) as well as decoded by the webhook.
func TestTypedInput(t *testing.T) {
	projections := typedProjections(t)
	r := rand.New(rand.NewPCG(38, 2))
	typed, fallback := map[string]int{}, map[string]int{}
	for run := range 3000 {
		var raw []byte
		var pod *corev1.Pod
		if run%3 == 0 {
			pod = randomPod(r)
			var err error
			raw, err = json.Marshal(pod)
			require.NoError(t, err)
		} else {
			raw = randomPodJSON(r)
			var err error
			if pod, err = decodePod(raw); err != nil {
				continue // a duplicate name, spelt with an escape: the webhook refuses it
			}
		}
		// The webhook defaults the namespace in place before deciding: typedInput never reads it.
		pod.Namespace = "defaulted"
		for name, proj := range projections {
			want, err := decodedInput(proj, "ns", raw)
			require.NoError(t, err)
			got, ok := typedInput(proj, "ns", pod, raw)
			if !ok {
				fallback[name]++
				continue
			}
			typed[name]++
			require.Zero(t, ast.Compare(want, got), "%s: %s\ntyped   %v\ngeneric %v", name, raw, got, want)
		}
	}
	for name := range projections {
		assert.Greater(t, typed[name], 300, "%s: built from the pod too seldom to prove anything (%d fell back)", name, fallback[name])
		assert.Positive(t, fallback[name], "%s: never fell back: the pods lack the fields it must refuse", name)
	}
}

// What the webhook receives from the API server is built from the decoded pod; what it cannot tell
// from the decoded pod is read from the JSON.
func TestTypedInputCases(t *testing.T) {
	gated := typedProjections(t)["ours and example gates"]
	const meta = `"name":"web-1","generateName":"web-","namespace":"shop","uid":"u"`
	const spec = `"spec":{"containers":[{"name":"app","image":"app"}]`
	for _, tc := range []struct {
		name, raw string
		typed     bool
	}{
		{"the API server's", `{"kind":"Pod","metadata":{` + meta + `,"labels":{"app":"web"},"annotations":{"a":"b"}},` + spec + `}}`, true},
		{"no annotations", `{"metadata":{` + meta + `,"labels":{"app":"web"}},` + spec + `}}`, true},
		{"neither labels nor annotations", `{"metadata":{` + meta + `},` + spec + `}}`, true},
		{"no metadata", `{` + spec + `}}`, true},
		{"hostNetwork", `{"metadata":{` + meta + `},` + spec + `,"hostNetwork":true}}`, true},
		{"hostNetwork false", `{"metadata":{` + meta + `},` + spec + `,"hostNetwork":false}}`, false},
		{"hostNetwork null", `{"metadata":{` + meta + `},` + spec + `,"hostNetwork":null}}`, false},
		{"no spec", `{"metadata":{` + meta + `}}`, true},
		{"spec null", `{"metadata":{` + meta + `},"spec":null}`, false},
		{"spec empty", `{"metadata":{` + meta + `},"spec":{}}`, false},
		{"labels null", `{"metadata":{` + meta + `,"labels":null},` + spec + `}}`, false},
		{"labels empty", `{"metadata":{` + meta + `,"labels":{}},` + spec + `}}`, false},
		{"metadata null", `{"metadata":null,` + spec + `}}`, false},
		{"an escaped name", `{"metadata":{` + meta + `,"label\u0073":{"app":"web"},"annotations":{"a":"b"}},` + spec + `,"hostNetwork":true}}`, true},
		{"an escape, no annotations", `{"metadata":{` + meta + `,"labels":{"app":"w\u0065b"}},` + spec + `}}`, false},
		{"invalid UTF-8", "{\"metadata\":{" + meta + ",\"labels\":{\"app\":\"w\xffb\"}}," + spec + "}}", false},
		{"U+FFFD", "{\"metadata\":{" + meta + ",\"labels\":{\"app\":\"w\uFFFDb\"}}," + spec + "}}", false},
		{"other UTF-8", `{"metadata":{` + meta + `,"labels":{"app":"wéb"}},` + spec + `}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, err := decodePod([]byte(tc.raw))
			require.NoError(t, err)
			want, err := decodedInput(gated, "ns", []byte(tc.raw))
			require.NoError(t, err)
			got, ok := typedInput(gated, "ns", pod, []byte(tc.raw))
			require.Equal(t, tc.typed, ok)
			if ok {
				require.Zero(t, ast.Compare(want, got), "typed %v\ngeneric %v", got, want)
			}
		})
	}
}

// randomPod is a pod as a program builds it, with the fields the projections read empty or not.
func randomPod(r *rand.Rand) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: pick(r, "", "web-1", "w\xffb"), GenerateName: pick(r, "", "web-"), UID: "u",
		Labels: randomMap(r), Annotations: randomMap(r),
	}}
	if r.IntN(4) > 0 {
		pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "app"}}
	}
	pod.Spec.HostNetwork = r.IntN(3) == 0
	return pod
}

func randomMap(r *rand.Rand) map[string]string {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return map[string]string{}
	}
	m := map[string]string{}
	for range 1 + r.IntN(6) {
		m[randomString(r)] = randomString(r)
	}
	return m
}

// Strings with the characters JSON escapes, and UTF-8, valid or not.
var strs = []string{"app", "web", "a/b", "", "é", "日本", `"q"`, "<&>", "\xff", "\uFFFD", "x\u2028y", "\t"}

func randomString(r *rand.Rand) string { return strs[r.IntN(len(strs))] }

func pick(r *rand.Rand, s ...string) string { return s[r.IntN(len(s))] }

// randomPodJSON is a pod's JSON as a client may write it: members absent, null, empty or set, names
// and strings escaped or not, invalid UTF-8.
func randomPodJSON(r *rand.Rand) []byte {
	member := func(name string, values ...string) string {
		v := values[r.IntN(len(values))]
		if v == "" {
			return ""
		}
		return jsonName(r, name) + ":" + v
	}
	metadata := object(r,
		member("name", "", `""`, jsonString(r)),
		member("generateName", "", `""`, jsonString(r)),
		member("uid", "", `"u"`),
		member("namespace", "", `"shop"`),
		member("labels", "", "null", "{}", jsonMap(r)),
		member("annotations", "", "null", "{}", jsonMap(r)),
	)
	spec := object(r,
		member("containers", "", `[{"name":"app","image":"app"}]`, "[]"),
		member("hostNetwork", "", "true", "false", "null"),
	)
	return []byte(object(r,
		member("kind", "", `"Pod"`),
		member("metadata", "", "null", metadata),
		member("spec", "", "null", spec),
		member("status", "", `{"phase":"Pending"}`),
	))
}

// object writes the members that are not empty, in a random order.
func object(r *rand.Rand, members ...string) string {
	r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	var kept []string
	for _, m := range members {
		if m != "" {
			kept = append(kept, m)
		}
	}
	return "{" + strings.Join(kept, ",") + "}"
}

func jsonMap(r *rand.Rand) string {
	var members []string
	seen := map[string]bool{}
	for range 1 + r.IntN(5) {
		k := randomString(r)
		if !seen[k] { // a duplicate name is refused by the webhook's decoder
			seen[k] = true
			members = append(members, quoteMaybeEscaped(r, k)+":"+jsonString(r))
		}
	}
	return object(r, members...)
}

func jsonString(r *rand.Rand) string { return quoteMaybeEscaped(r, randomString(r)) }

// jsonName is a member's name, sometimes with a letter written as an escape.
func jsonName(r *rand.Rand, name string) string {
	if r.IntN(40) == 0 {
		i := r.IntN(len(name))
		return `"` + name[:i] + fmt.Sprintf(`\u%04x`, name[i]) + name[i+1:] + `"`
	}
	return `"` + name + `"`
}

// quoteMaybeEscaped writes s as a JSON string, its bytes as they are where JSON allows (invalid
// UTF-8 included) or, sometimes, every character as an escape.
func quoteMaybeEscaped(r *rand.Rand, s string) string {
	if r.IntN(20) == 0 {
		var b strings.Builder
		b.WriteByte('"')
		for _, c := range s {
			if c > 0xffff {
				b.WriteString(string(c))
				continue
			}
			fmt.Fprintf(&b, `\u%04x`, c)
		}
		b.WriteByte('"')
		return b.String()
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
