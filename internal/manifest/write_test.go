package manifest

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func kindsFixture(t *testing.T) []*Object {
	t.Helper()
	data, err := os.ReadFile("testdata/kinds.yaml")
	require.NoError(t, err)
	objs, err := Decode("kinds.yaml", data)
	require.NoError(t, err)
	return objs
}

func objects(objs []*Object) []runtime.Object {
	out := make([]runtime.Object, len(objs))
	for i, o := range objs {
		out[i] = o.Obj
	}
	return out
}

// assertSameObject compares decoded objects semantically (quantities by value, nil and empty
// slices alike). A ControllerRevision's data keeps the JSON bytes as written, whose whitespace
// depends on the output format, so it is compared as JSON.
func assertSameObject(t *testing.T, want, got runtime.Object, msgAndArgs ...any) {
	t.Helper()
	if w, ok := want.(*appsv1.ControllerRevision); ok {
		g, ok := got.(*appsv1.ControllerRevision)
		require.True(t, ok, msgAndArgs...)
		assert.JSONEq(t, string(w.Data.Raw), string(g.Data.Raw), msgAndArgs...)
		w, g = w.DeepCopy(), g.DeepCopy()
		w.Data.Raw, g.Data.Raw = nil, nil
		want, got = w, g
	}
	assert.True(t, apiequality.Semantic.DeepEqual(want, got), msgAndArgs...)
}

func encode(t *testing.T, format Format, objs ...runtime.Object) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, Encode(&b, format, objs...))
	return b.String()
}

func TestEncodeRoundTrip(t *testing.T) {
	objs := kindsFixture(t)
	for _, format := range []Format{YAML, JSON} {
		t.Run(string(format), func(t *testing.T) {
			out := encode(t, format, objects(objs)...)
			again, err := Decode("out", []byte(out))
			require.NoError(t, err)
			require.Len(t, again, len(objs))
			for i := range objs {
				assertSameObject(t, objs[i].Obj, again[i].Obj, "%s differs after %s round trip", objs[i], format)
			}
			assert.Equal(t, out, encode(t, format, objects(again)...), "encoding is stable")
		})
	}
}

func TestEncodeEachKindRoundTrip(t *testing.T) {
	for _, o := range kindsFixture(t) {
		for _, format := range []Format{YAML, JSON} {
			again, err := Decode("out", []byte(encode(t, format, o.Obj)))
			require.NoError(t, err, o.String())
			require.Len(t, again, 1)
			assertSameObject(t, o.Obj, again[0].Obj, "%s differs after %s round trip", o, format)
		}
	}
}

// TestEncodeHasNoNoise guards the artefacts of marshalling typed objects: empty structs the
// manifest did not have ("status", "strategy", "updateStrategy", "resources", pruned by
// omitZeroStructs) and "creationTimestamp: null" (omitzero in apimachinery since v0.34).
func TestEncodeHasNoNoise(t *testing.T) {
	noise := []string{"status", "creationTimestamp", "strategy: {}", "updateStrategy: {}", "resources: {}", `"strategy": {}`, `"updateStrategy": {}`, `"resources": {}`}
	for _, o := range kindsFixture(t) {
		for _, format := range []Format{YAML, JSON} {
			out := encode(t, format, o.Obj)
			for _, n := range noise {
				assert.NotContains(t, out, n, o.String())
			}
		}
	}
	// Also for objects built in code, whose templates have empty metadata.
	out := encode(t, YAML, &appsv1.Deployment{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}, &appsv1.ReplicaSet{},
		&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}})
	for _, n := range noise {
		assert.NotContains(t, out, n)
	}
}

// A pointer to an empty struct says something (an emptyDir volume, a privileged: false), so only
// zero struct values are left out.
func TestEncodeKeepsEmptyPointers(t *testing.T) {
	in := "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  securityContext: {}\n  containers: [{name: c, securityContext: {privileged: false}, resources: {limits: {cpu: 100m}}}]\n  volumes: [{name: v, emptyDir: {}}]\n"
	objs, err := Decode("in", []byte(in))
	require.NoError(t, err)
	out := encode(t, YAML, objs[0].Obj)
	for _, kept := range []string{"emptyDir: {}", "securityContext: {}", "privileged: false", "cpu: 100m"} {
		assert.Contains(t, out, kept)
	}
}

func TestEncodeKeepsInformation(t *testing.T) {
	in := `apiVersion: v1
kind: Pod
metadata:
  name: p
  creationTimestamp: "2024-05-01T10:00:00Z"
  annotations:
    json: '{"a":"<b>&"}'
    looks-like-bool: "yes"
    looks-like-number: "1.0"
spec:
  activeDeadlineSeconds: 9007199254740993
  containers: [{name: c, image: i}]
status:
  phase: Running
`
	objs, err := Decode("in", []byte(in))
	require.NoError(t, err)
	for _, format := range []Format{YAML, JSON} {
		out := encode(t, format, objs[0].Obj)
		assert.Contains(t, out, "Running", "a status with information is kept")
		assert.Contains(t, out, "2024-05-01T10:00:00Z")
		assert.Contains(t, out, "9007199254740993", "int64 beyond float64 precision")
		assert.Contains(t, out, `<b>&`, "no HTML escaping")
		again, err := Decode("out", []byte(out))
		require.NoError(t, err)
		assert.True(t, apiequality.Semantic.DeepEqual(objs[0].Obj, again[0].Obj), format)
	}
}

func TestEncodeYAMLGolden(t *testing.T) {
	objs, err := Decode("in", []byte(`{"kind": "Deployment", "apiVersion": "apps/v1", "metadata": {"name": "web"},
"spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}},
"spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}`))
	require.NoError(t, err)
	want := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - image: nginx
        name: web
---
apiVersion: v1
kind: Namespace
metadata:
  name: "n"
`
	// No "strategy: {}", "resources: {}" or "spec: {}": the manifest did not say them (omitZeroStructs).
	// "n" is quoted: YAML 1.1 (which kubectl and sigs.k8s.io/yaml read) would take it for false.
	assert.Equal(t, want, encode(t, YAML, objs[0].Obj, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n"}}))
}

func TestEncodeJSONShape(t *testing.T) {
	objs := kindsFixture(t)
	decodeJSON := func(t *testing.T, s string) map[string]any {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(s), &m))
		return m
	}

	one := encode(t, JSON, objs[5].Obj)
	assert.Equal(t, "Deployment", decodeJSON(t, one)["kind"], "one object: the object itself")
	assert.True(t, strings.HasPrefix(one, "{\n    \"apiVersion\""), "indented like kubectl")
	assert.True(t, strings.HasSuffix(one, "}\n"))

	two := decodeJSON(t, encode(t, JSON, objs[4].Obj, objs[5].Obj))
	assert.Equal(t, "v1", two["apiVersion"])
	assert.Equal(t, "List", two["kind"], "several objects: a v1/List")
	items := two["items"].([]any)
	require.Len(t, items, 2)
	assert.Equal(t, "Pod", items[0].(map[string]any)["kind"])
	assert.Equal(t, "Deployment", items[1].(map[string]any)["kind"])

	none := decodeJSON(t, encode(t, JSON))
	assert.Equal(t, map[string]any{"apiVersion": "v1", "kind": "List", "items": []any{}}, none)
	assert.Equal(t, "", encode(t, YAML), "no object, no YAML document")
}

func TestEncodeTypeMeta(t *testing.T) {
	out := encode(t, YAML, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "bare"}})
	assert.True(t, strings.HasPrefix(out, "apiVersion: apps/v1\nkind: Deployment\n"), out)
}

func TestEncodeErrors(t *testing.T) {
	var b bytes.Buffer
	assert.ErrorContains(t, Encode(&b, "xml", &corev1.Pod{}), `unknown output format "xml"`)
	assert.ErrorContains(t, Encode(&b, YAML, &corev1.Service{}), "not a supported kind")
}
