package manifest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestLines(t *testing.T) {
	yamlDoc := "# a comment\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels:\n    app.kubernetes.io/name: x\n  annotations:\n    a.b/c: d\nspec:\n  containers:\n  - name: c\n    image: i\n    resources:\n      limits:\n        cpu: 1\n  - &second\n    name: d\n"
	in := DecodeInput("f.yaml", []byte(yamlDoc))
	require.Empty(t, in.Errors)
	require.Len(t, in.Objects, 1)
	o := in.Objects[0]
	for field, line := range map[string]int{
		"":                                       3, // the document's first line, not the comment's
		"kind":                                   4,
		"metadata.labels.app.kubernetes.io/name": 8,  // a key with dots
		"metadata.annotations[a.b/c]":            10, // apimachinery's notation for a map key
		"spec.containers[0].image":               14,
		"spec.containers[0].resources.limits[cpu]":  17,
		"spec.containers[1].name":                   19, // through an anchor
		"spec.containers[0].ports[0].containerPort": 13, // not written: its deepest written ancestor
		"spec.selector":                             11,
		"status":                                    3,
	} {
		assert.Equal(t, line, o.Line(field), field)
	}

	json := "\n\n{\"apiVersion\": \"v1\", \"kind\": \"Pod\",\n \"metadata\": {\"name\": \"a\"},\n \"spec\": {\"containers\": [{\"name\": \"c\",\n   \"image\": \"i\"}]}}"
	in = DecodeInput("f.json", []byte(json))
	require.Len(t, in.Objects, 1)
	assert.Equal(t, 3, in.Objects[0].Line(""))
	assert.Equal(t, 6, in.Objects[0].Line("spec.containers[0].image"))

	list := "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a}\n- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: b\n"
	in = DecodeInput("l.yaml", []byte(list))
	require.Len(t, in.Objects, 2)
	assert.Equal(t, 10, in.Objects[1].Line("metadata.name"))
	assert.Equal(t, "l.yaml:10: document 1 items[1] (Pod/b): metadata.name: x", in.Objects[1].Report("metadata.name", "x").Error())
}

// A value of the wrong type does not hide the unknown fields around it, and what decodes is kept
// as a rejected object, to be checked further.
func TestEveryProblemOfADocument(t *testing.T) {
	doc := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\nspec:\n  containers:\n  - name: c\n    imagee: i\n    resources: {limits: {cpu: lots}}\n    ports: [{containerPort: x}, {containerPort: 80}]\n  hostNetworkk: true\n"
	in := DecodeInput("f.yaml", []byte(doc))
	assert.Empty(t, in.Objects)
	assert.Equal(t, []string{
		"f.yaml:8: document 1 (Pod/a): spec.containers[0].imagee: unknown field",
		"f.yaml:9: document 1 (Pod/a): spec.containers[0].resources.limits.cpu: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
		"f.yaml:10: document 1 (Pod/a): spec.containers[0].ports[0].containerPort: expected int32, got string",
		"f.yaml:11: document 1 (Pod/a): spec.hostNetworkk: unknown field",
	}, errorLines(t, in.Errors.err()))
	require.Len(t, in.Rejected, 1)
	r := in.Rejected[0]
	pod := r.Obj.(*corev1.Pod)
	require.Len(t, pod.Spec.Containers, 1)
	assert.Equal(t, "c", pod.Spec.Containers[0].Name)
	assert.Len(t, pod.Spec.Containers[0].Ports, 2, "a failing item keeps the indices of those after it")
	assert.Equal(t, int32(80), pod.Spec.Containers[0].Ports[1].ContainerPort)
	assert.True(t, r.Dropped("spec.containers[0].ports[0].containerPort"))
	assert.True(t, r.Dropped("spec.containers[0].resources.limits.cpu"))
	assert.False(t, r.Dropped("spec.containers[0].resources.limits"))
	assert.False(t, r.Dropped("spec.containers[0].ports[1].containerPort"))

	written, err := r.Written()
	require.NoError(t, err)
	assert.Equal(t, pod, written)
}

// No group but apps.kruise.io serves a SidecarSet: another is a mistyped apiVersion, which the API
// server refuses, not a kind to pass through.
func TestSidecarSetOfAnotherGroup(t *testing.T) {
	in := DecodeInput("f.yaml", []byte("apiVersion: apps:kruise.io/v1alpha1\nkind: SidecarSet\nmetadata: {name: s}\n"))
	assert.Empty(t, in.Objects)
	assert.Equal(t, []string{
		`f.yaml:1: document 1 (SidecarSet/s): apiVersion: unsupported apiVersion "apps:kruise.io/v1alpha1" for kind SidecarSet (supported: apps.kruise.io/v1alpha1, apps.kruise.io/v1beta1)`,
	}, errorLines(t, in.Errors.err()))
}

// Every item of a v1/List asks for its lines in the one document text: the text is read once for
// all of them, not once per item, which made reporting on a `kubectl get pods -o yaml` of a few
// thousand pods take minutes.
func TestListItemsShareOneReadingOfTheText(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	const items = 2000
	for i := range items {
		fmt.Fprintf(&b, "- apiVersion: v1\n  kind: Pod\n  metadata: {name: p%d}\n", i)
	}
	in := DecodeInput("list.yaml", []byte(b.String()))
	require.Empty(t, in.Errors)
	require.Len(t, in.Objects, items)
	require.Equal(t, 4, in.Objects[0].Line("")) // the text is read here, once

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i, o := range in.Objects {
		assert.Equal(t, 4+3*i, o.Line(""))
	}
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	assert.Less(t, allocated, uint64(b.Len()), "allocated %d bytes finding the lines of %d items in %d bytes", allocated, items, b.Len())
}
