package webhook

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/randomobjects"
	"github.com/sidecarops/sidecarops/test/bench/perfinputs"
)

// decodedKinds are the types decodeObject decodes requests' objects into.
var decodedKinds = []func() any{
	func() any { return &corev1.Pod{} },
	func() any { return &v1beta1.SidecarSet{} },
	func() any { return &v1alpha1.SidecarSet{} },
}

// requireDecodersAgree decodes raw into each kind with decodeObject and with the decoder it replaced
// (sigs.k8s.io/json, strict about duplicate fields, as the webhook decoded until JSON v2): both must
// refuse it or both decode the same value. The one difference allowed is a duplicate name where the
// old decoder did not look (inside a field neither decodes): JSON v2 refuses those too.
func requireDecodersAgree(t *testing.T, raw []byte) {
	t.Helper()
	for _, kind := range decodedKinds {
		before, after := kind(), kind()
		strict, err := kjson.UnmarshalStrict(raw, before, kjson.DisallowDuplicateFields)
		oldErr := errors.Join(append(strict, err)...)
		newErr := decodeObject(raw, "object", after)
		switch {
		case oldErr == nil && newErr == nil:
			require.True(t, reflect.DeepEqual(before, after), "%T decoded differently from %s:\nbefore: %#v\nafter:  %#v", before, raw, before, after)
		case oldErr == nil && errors.Is(newErr, jsontext.ErrDuplicateName):
		case (oldErr == nil) != (newErr == nil):
			require.Failf(t, "the decoders disagree", "%T from %s:\nbefore: %v\nafter:  %v", before, raw, oldErr, newErr)
		}
	}
}

// TestDecodersAgree: decodeObject's JSON v2 reads every object as the reflection decoder it
// replaced did, so that no admission's outcome changed with it: objects filled at random the way
// Kubernetes' round-trip tests fill them (every field of a pod and of both SidecarSet versions,
// times, quantities, int-or-strings), the benchmarks' realistic pod and fleet, and JSON written
// to find the decoders' corners.
func TestDecodersAgree(t *testing.T) {
	fill := randomobjects.Filler(t, 1)
	for range 300 {
		for _, kind := range decodedKinds {
			obj := kind()
			fill.Fill(obj)
			raw, err := json.Marshal(obj)
			require.NoError(t, err)
			requireDecodersAgree(t, raw)
			require.NoError(t, decodeObject(raw, "object", kind()), "%s", raw)
		}
	}

	in := perfinputs.For(t, 100)
	requireDecodersAgree(t, in.PodJSON)
	for _, ss := range in.SidecarSets {
		raw, err := json.Marshal(ss)
		require.NoError(t, err)
		requireDecodersAgree(t, raw)
	}

	for _, raw := range cornerObjects {
		requireDecodersAgree(t, []byte(raw))
	}
}

// cornerObjects are JSON documents where two JSON decoders could part: nulls, empty and missing
// collections, names in other capitals, numbers in other notations, broken UTF-8 and escapes,
// duplicate names, trailing data.
var cornerObjects = []string{
	`{}`,
	`{"metadata":null,"spec":null,"status":null}`,
	`{"metadata":{"labels":{},"annotations":null,"finalizers":[],"ownerReferences":null}}`,
	`{"spec":{"containers":[],"initContainers":null,"volumes":[{}],"nodeSelector":{}}}`,
	`{"spec":{"containers":[null,{"name":"a","env":[],"ports":null}]}}`,
	`{"Metadata":{"name":"x"},"metadata":{"Name":"y","NAME":"z"},"SPEC":{}}`,
	`{"metadata":{"name":"a","name":"b"}}`,
	`{"metadata":{"labels":{"a":"1","a":"2"}}}`,
	`{"x-unknown":{"a":1,"a":2},"metadata":{"name":"a"}}`,
	`{"metadata":{"generation":1e2}}`,
	`{"metadata":{"generation":1.0}}`,
	`{"metadata":{"generation":-0}}`,
	`{"metadata":{"generation":99999999999999999999}}`,
	`{"metadata":{"generation":"1"}}`,
	`{"spec":{"terminationGracePeriodSeconds":null,"priority":2147483648}}`,
	`{"metadata":{"name":"\ud800","labels":{"k":"\udc00x","\u00e9":"\u0000"}}}`,
	"{\"metadata\":{\"name\":\"\xff\xfe\",\"labels\":{\"\xc3\x28\":\"v\"}}}",
	`{"metadata":{"creationTimestamp":null,"deletionTimestamp":"2026-11-27T04:00:00Z"}}`,
	`{"metadata":{"creationTimestamp":"not a time"}}`,
	`{"spec":{"containers":[{"name":"a","resources":{"limits":{"cpu":"100m","memory":1e3}}}]}}`,
	`{"spec":{"containers":[{"name":"a","resources":{"limits":{"cpu":"x"}}}]}}`,
	`{"spec":{"containers":[{"name":"a","livenessProbe":{"httpGet":{"port":"http"}},"readinessProbe":{"tcpSocket":{"port":8080}}}]}}`,
	`{"spec":{"containers":[{"name":"a","livenessProbe":{"httpGet":{"port":null}}}]}}`,
	`{"spec":{"containers":"nginx"}}`,
	`{"spec":{"selector":{"matchLabels":{"app":"a"}},"updateStrategy":{"maxUnavailable":"50%","partition":3}}}`,
	`{"spec":{"updateStrategy":{"maxUnavailable":1.5}}}`,
	`{"metadata":{"name":"a"}} {}`,
	`{"metadata":{"name":"a"}`,
	`[]`,
	`"pod"`,
}

// FuzzDecodersAgree runs requireDecodersAgree on arbitrary bytes, seeded with the corners.
func FuzzDecodersAgree(f *testing.F) {
	for _, raw := range cornerObjects {
		f.Add([]byte(raw))
	}
	f.Fuzz(requireDecodersAgree)
}
