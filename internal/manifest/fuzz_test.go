package manifest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FuzzDecode checks that no input makes Decode panic, that every error is one line, and that
// whatever decodes is stable: encoding it, decoding that and encoding again gives the same bytes
// (the first encoding may normalise, e.g. quantities and key order; after that nothing changes).
// Seeds: testdata/fuzz/FuzzDecode and the manifest fixtures under testdata.
func FuzzDecode(f *testing.F) {
	fixtures, _ := filepath.Glob("testdata/*.yaml")
	tree, _ := filepath.Glob("testdata/tree/*.*")
	for _, p := range append(fixtures, tree...) {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := Decode("fuzz", data)
		if err != nil {
			var es Errors
			ok := errors.As(err, &es)
			if !ok {
				t.Fatalf("error is %T, want Errors", err)
			}
			for _, e := range es {
				if msg := e.Error(); strings.ContainsAny(msg, "\r\n") {
					t.Fatalf("error spans lines: %q", msg)
				}
				if strings.HasPrefix(e.Reason, internalError) {
					t.Fatalf("panic while decoding: %v", e)
				}
			}
		}
		if len(objs) == 0 {
			return
		}
		for _, o := range objs {
			// Writing back an unchanged pod view must not change a typed workload. A document's template
			// is written as Encode writes typed objects (no "resources: {}"), so there the pod must stay
			// the same and a second write must change nothing.
			if pod, ok := PodTemplate(o.Obj, "default"); ok {
				one := objs[o.Index : o.Index+1]
				before := encodeFuzz(t, YAML, one)
				if err := SetPodTemplate(o.Obj, pod); err != nil {
					t.Fatalf("SetPodTemplate: %v", err)
				}
				after := encodeFuzz(t, YAML, one)
				if _, isDoc := o.Obj.(*unstructured.Unstructured); !isDoc && after != before {
					t.Fatalf("writing back the unchanged pod template changed %s:\n%s\nto\n%s", o, before, after)
				}
				again, ok := PodTemplate(o.Obj, "default")
				if !ok || !apiequality.Semantic.DeepEqual(pod, again) {
					t.Fatalf("writing back the unchanged pod template changed the pod of %s:\n%+v\nto\n%+v", o, pod, again)
				}
				if err := SetPodTemplate(o.Obj, again); err != nil {
					t.Fatalf("SetPodTemplate: %v", err)
				}
				if twice := encodeFuzz(t, YAML, one); twice != after {
					t.Fatalf("writing back the pod template twice changed %s:\n%s\nto\n%s", o, after, twice)
				}
			}
			if cm, ok := o.Obj.(*corev1.ConfigMap); ok {
				_, _ = Whitelist(cm, false) // must not panic
			}
		}
		for _, format := range []Format{YAML, JSON} {
			first := encodeFuzz(t, format, objs)
			again, err := Decode("encoded", []byte(first))
			if err != nil {
				t.Fatalf("decoding the %s encoding fails: %v\n%s", format, err, first)
			}
			if len(again) != len(objs) {
				t.Fatalf("%s encoding of %d objects decodes to %d", format, len(objs), len(again))
			}
			if second := encodeFuzz(t, format, again); second != first {
				t.Fatalf("%s encoding is not stable:\n%s\nthen\n%s", format, first, second)
			}
		}
	})
}

func encodeFuzz(t *testing.T, format Format, objs []*Object) string {
	var b bytes.Buffer
	if err := Encode(&b, format, objects(objs)...); err != nil {
		t.Fatalf("Encode %s: %v", format, err)
	}
	return b.String()
}
