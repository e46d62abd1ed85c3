package controller

import (
	"fmt"
	"go/token"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/sidecarops/sidecarops/internal/testing/fieldreads"
	"github.com/sidecarops/sidecarops/internal/testing/randomobjects"
)

// The pod cache keeps of a pod only what the controller reads, by a hand-kept list (compactPod),
// and controller/rollout reads pods by hand-written code: a field rollout starts to read that the
// cache does not keep reads as empty on every cached pod, and only a test that happens to set that
// field would notice. This guard reads the list of pod fields from rollout's sources (and those of
// every function of the module it calls) and checks that each survives the cache's transform on
// randomly filled pods. If it fails, keep the field in compactPod or stop reading it.
func TestPodCacheKeepsWhatRolloutReads(t *testing.T) {
	reads := fieldreads.Of(t, reflect.TypeFor[corev1.Pod](), "github.com/sidecarops/sidecarops/controller/rollout")
	// Fields rollout is known to read: an analysis that finds none of them proves nothing.
	for _, r := range []fieldreads.Read{
		{Type: "k8s.io/api/core/v1.Container", Field: "Image"},
		{Type: "k8s.io/api/core/v1.ContainerStatus", Field: "ImageID"},
		{Type: "k8s.io/apimachinery/pkg/apis/meta/v1.ObjectMeta", Field: "Annotations"},
		{Type: "k8s.io/apimachinery/pkg/apis/meta/v1.ObjectMeta", Field: "DeletionTimestamp"}, // mutation.IsActive
	} {
		if _, ok := reads[r]; !ok {
			t.Fatalf("the analysis misses %v; it found %v", r, reads)
		}
	}
	for seed := range int64(100) {
		var pod corev1.Pod
		randomobjects.Filler(t, seed).Fill(&pod)
		if paths := lost(reads, reflect.ValueOf(pod), reflect.ValueOf(*throughPodCache(t, pod.DeepCopy())), "pod"); len(paths) > 0 {
			t.Fatalf("seed %d: rollout reads %v, which the pod cache does not keep", seed, paths)
		}
	}
}

// throughPodCache is what a reader of the pod cache gets of pod: the pod informer's transform
// (after the manager's own, which strips managedFields), read back.
func throughPodCache(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	rec, err := (&podInformer{}).transform(cache.TransformStripManagedFields())(pod)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := expanded(rec).(*corev1.Pod)
	if !ok {
		t.Fatalf("the cache gives out %T", got)
	}
	return got
}

// lost lists the paths under want whose fields reads names and got does not hold as want does: a
// read field is compared field by field when reads names fields of its type, else whole.
func lost(reads map[fieldreads.Read]token.Position, want, got reflect.Value, path string) []string {
	t := want.Type()
	switch t.Kind() {
	case reflect.Pointer:
		if want.IsNil() || got.IsNil() {
			if want.IsNil() != got.IsNil() {
				return []string{path}
			}
			return nil
		}
		return lost(reads, want.Elem(), got.Elem(), path)
	case reflect.Slice:
		if want.Len() != got.Len() || want.IsNil() != got.IsNil() {
			return []string{path}
		}
		var out []string
		for i := range want.Len() {
			out = append(out, lost(reads, want.Index(i), got.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	case reflect.Struct:
		var out []string
		read := false
		for i := range t.NumField() {
			name := t.Field(i).Name
			if _, ok := reads[fieldreads.Read{Type: fieldreads.TypeName(t), Field: name}]; ok {
				read = true
				out = append(out, lost(reads, want.Field(i), got.Field(i), path+"."+name)...)
			}
		}
		if read {
			return out
		}
	}
	if !reflect.DeepEqual(want.Interface(), got.Interface()) {
		return []string{path}
	}
	return nil
}
