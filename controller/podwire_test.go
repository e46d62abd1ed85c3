package controller

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/internal/testing/randomobjects"
)

// A pod's protobuf decoded into a record is the record of the pod decoded whole and trimmed
// (trimmed), for pods filled at random, every field, managedFields included; so is a list of
// them. Broken encodings are errors.
func TestPodWire(t *testing.T) {
	fill := randomobjects.Filler(t, 2)
	for range 500 {
		var p corev1.Pod
		fill.Fill(&p)
		if len(p.ManagedFields) == 0 {
			p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
		}
		b, err := p.Marshal()
		require.NoError(t, err)
		var whole corev1.Pod
		require.NoError(t, whole.Unmarshal(b))
		want := compact(trimmed(t, &whole))

		var got compactPod
		require.NoError(t, got.Unmarshal(b))
		require.True(t, reflect.DeepEqual(want, &got), "the record decoded differs from the trimmed pod's:\n%#v\n%#v", want, &got)

		// Truncated anywhere, the encoding is refused or decodes a prefix; it never panics.
		for cut := 1; cut < len(b); cut += 1 + len(b)/16 {
			var partial compactPod
			_ = partial.Unmarshal(b[:cut])
		}
	}

	var list corev1.PodList
	fill.Fill(&list)
	b, err := list.Marshal()
	require.NoError(t, err)
	var whole corev1.PodList
	require.NoError(t, whole.Unmarshal(b))
	var got compactPodList
	require.NoError(t, got.Unmarshal(b))
	assert.Equal(t, whole.ListMeta, got.ListMeta)
	require.Len(t, got.Items, len(whole.Items))
	for i := range whole.Items {
		require.True(t, reflect.DeepEqual(compact(trimmed(t, &whole.Items[i])), &got.Items[i]), "item %d", i)
	}
	cp := got.DeepCopyObject().(*compactPodList)
	require.True(t, reflect.DeepEqual(&got, cp))

	// Fields after managedFields (a message in parts, merged) are decoded too.
	first, err := (&metav1.ObjectMeta{Name: "web-0", Labels: map[string]string{"app": "web"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}).Marshal()
	require.NoError(t, err)
	second, err := (&metav1.ObjectMeta{Labels: map[string]string{"tier": "front"}, Annotations: map[string]string{"a": "b"}}).Marshal()
	require.NoError(t, err)
	meta := append(first, second...)
	var merged metav1.ObjectMeta
	require.NoError(t, merged.Unmarshal(meta))
	merged.ManagedFields = nil
	var rec compactPod
	require.NoError(t, rec.Unmarshal(protowire.AppendBytes(protowire.AppendTag(nil, podMetadata, protowire.BytesType), meta)))
	assert.Equal(t, merged, rec.ObjectMeta)
	assert.Equal(t, map[string]string{"app": "web", "tier": "front"}, rec.Labels)

	// Wrong wire types where messages and strings belong.
	for _, bad := range [][]byte{{0x08, 0x01}, {0x12, 0x02, 0x10, 0x01}, {0x0a, 0x05}} {
		var r compactPod
		assert.Error(t, r.Unmarshal(bad), "%x", bad)
	}
}
