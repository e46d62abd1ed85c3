package controller

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	apistreaming "k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"

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

// A pod watch's stream, framed and encoded as the API server sends it, decodes through the
// in-place decoders exactly as through client-go's own: the same events, the same records and
// Status. The events are all decoded before any is compared, so a record that kept part of a frame
// the next event was read over would differ.
func TestInPlaceWatchDecoding(t *testing.T) {
	fill := randomobjects.Filler(t, 3)
	pod := func(name string) *corev1.Pod {
		var p corev1.Pod
		fill.Fill(&p)
		p.Name = name
		p.ManagedFields = append(p.ManagedFields, metav1.ManagedFieldsEntry{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate})
		return &p
	}
	bookmark := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "42", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	events := []struct {
		typ watch.EventType
		obj runtime.Object
	}{
		{watch.Added, pod("big")},
		{watch.Modified, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "small", ResourceVersion: "7"}}},
		{watch.Bookmark, bookmark},
		{watch.Modified, pod("other")},
		{watch.Deleted, pod("gone")},
		{watch.Error, &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old"}},
	}
	var stream bytes.Buffer
	for _, e := range events {
		stream.Write(watchFrame(t, e.typ, e.obj))
	}
	decodeAll := func(ns runtime.NegotiatedSerializer) []watch.Event {
		d := watchDecoder(t, ns, stream.Bytes())
		var out []watch.Event
		for {
			typ, obj, err := d.Decode()
			if errors.Is(err, io.EOF) {
				return out
			}
			require.NoError(t, err)
			out = append(out, watch.Event{Type: typ, Object: obj})
		}
	}
	theirs, ours := decodeAll(podWire.WithoutConversion()), decodeAll(inPlace(podWire.WithoutConversion()))
	require.Len(t, ours, len(events))
	for i, e := range events {
		assert.Equal(t, e.typ, ours[i].Type)
		require.True(t, reflect.DeepEqual(theirs[i], ours[i]), "event %d (%s) differs:\n%#v\n%#v", i, e.typ, theirs[i], ours[i])
		if p, isPod := e.obj.(*corev1.Pod); isPod {
			// The pod as decoded whole from its encoding (times in UTC, quantities canonical), trimmed.
			b, err := p.Marshal()
			require.NoError(t, err)
			var whole corev1.Pod
			require.NoError(t, whole.Unmarshal(b))
			want := compact(trimmed(t, &whole))
			require.True(t, reflect.DeepEqual(want, ours[i].Object), "event %d: the record differs from the trimmed pod's:\n%#v\n%#v", i, want, ours[i].Object)
		}
	}
	assert.IsType(t, &metav1.Status{}, ours[len(ours)-1].Object)

	// Lists are client-go's decoding; an object that is not a pod goes to it too.
	objects, err := runtime.NewClientNegotiator(inPlace(podWire.WithoutConversion()), corev1.SchemeGroupVersion).Decoder(runtime.ContentTypeProtobuf, nil)
	require.NoError(t, err)
	var encoded bytes.Buffer
	require.NoError(t, apiServerProtobuf.encoder.Encode(&corev1.PodList{Items: []corev1.Pod{*pod("listed")}}, &encoded))
	list, err := runtime.Decode(objects, encoded.Bytes())
	require.NoError(t, err)
	require.IsType(t, &compactPodList{}, list)
	assert.Equal(t, "listed", list.(*compactPodList).Items[0].Name)
}

// apiServerProtobuf is how the API server encodes objects and watch events in protobuf: each object
// in its envelope, inside a watch event encoded raw, in length-delimited frames.
var apiServerProtobuf = func() (p struct {
	info    runtime.SerializerInfo
	encoder runtime.Encoder
}) {
	codecs := serializer.NewCodecFactory(clientgoscheme.Scheme)
	p.info, _ = runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	p.encoder = codecs.EncoderForVersion(p.info.Serializer, corev1.SchemeGroupVersion)
	return p
}()

// watchFrame is one watch event's frame as the API server sends it.
func watchFrame(t testing.TB, typ watch.EventType, obj runtime.Object) []byte {
	t.Helper()
	var encoded, frame bytes.Buffer
	require.NoError(t, apiServerProtobuf.encoder.Encode(obj, &encoded))
	ev := &metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: encoded.Bytes()}}
	require.NoError(t, apiServerProtobuf.info.StreamSerializer.Encode(ev, apiServerProtobuf.info.StreamSerializer.NewFrameWriter(&frame)))
	return frame.Bytes()
}

// watchDecoder reads a watch's stream as client-go's REST client does, with the decoders of ns.
func watchDecoder(t testing.TB, ns runtime.NegotiatedSerializer, stream []byte) watch.Decoder {
	t.Helper()
	objects, streaming, framer, err := runtime.NewClientNegotiator(ns, corev1.SchemeGroupVersion).StreamDecoder(runtime.ContentTypeProtobuf, nil)
	require.NoError(t, err)
	return restclientwatch.NewDecoder(apistreaming.NewDecoder(framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream))), streaming), objects)
}

// What decoding a pod's watch event costs, from its frame to the record, through client-go's
// decoders and through the in-place ones (the pod of BenchmarkPodRecord).
//
//	go test ./controller/ -run '^$' -bench PodWatchEvent -benchmem
func BenchmarkPodWatchEvent(b *testing.B) {
	frame := watchFrame(b, watch.Modified, benchmarkPod(0))
	stream := bytes.Repeat(frame, 1000)
	for _, c := range []struct {
		name string
		ns   runtime.NegotiatedSerializer
	}{{"decoders=client-go", podWire.WithoutConversion()}, {"decoders=in-place", inPlace(podWire.WithoutConversion())}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			d := watchDecoder(b, c.ns, stream)
			n := 0
			for b.Loop() {
				if n == 1000 {
					d = watchDecoder(b, c.ns, stream)
					n = 0
				}
				if _, _, err := d.Decode(); err != nil {
					b.Fatal(err)
				}
				n++
			}
		})
	}
}
