package mutation

import (
	"slices"
	"strconv"
	"strings"

	"gomodules.xyz/jsonpatch/v2"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// Paths of the pod fields injection may touch. Everything else in the pod is left alone, so the
// patch never has to address it.
const (
	pathImagePullSecrets = "/spec/imagePullSecrets" //nolint:gosec // G101: a JSON pointer to the pod field, not a credential
	pathAnnotations      = "/metadata/annotations"
)

// The lists injection grows, each with the path that appends to it, made once: joining that per
// operation was an allocation each.
var (
	pathContainers     = listPath{"/spec/containers", "/spec/containers/-"}
	pathInitContainers = listPath{"/spec/initContainers", "/spec/initContainers/-"}
	pathVolumes        = listPath{"/spec/volumes", "/spec/volumes/-"}
)

// listPath is a list's path, and the path of its end.
type listPath struct{ list, end string }

// pointerEscaper escapes one RFC 6901 reference token. strings.Replacer substitutes in a single
// pass, so the "~1" it writes for "/" is never re-escaped to "~01".
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func pointerToken(s string) string { return pointerEscaper.Replace(s) }

// annotationPaths are the paths of the annotations every injection writes, made once: escaping
// and joining them per pod was a large part of what the annotations' operations cost.
var annotationPaths = map[string]string{}

func init() {
	for _, k := range []string{v1beta1.SidecarSetHashAnnotation, v1beta1.SidecarSetHashWithoutImageAnnotation,
		v1beta1.SidecarSetListAnnotation, v1beta1.SidecarSetWorkingHotUpgradeContainer} {
		annotationPaths[k] = annotationPath(k)
	}
}

// annotationPath is the path of the annotation k.
func annotationPath(k string) string {
	if p, ok := annotationPaths[k]; ok {
		return p
	}
	return pathAnnotations + "/" + pointerToken(k)
}

func opAdd(path string, v any) jsonpatch.JsonPatchOperation {
	return jsonpatch.NewOperation("add", path, v)
}

func opReplace(path string, v any) jsonpatch.JsonPatchOperation {
	return jsonpatch.NewOperation("replace", path, v)
}

// listGrowth is the plan for one list of the original pod: some elements replaced where they are,
// some inserted in front, some appended. It is the only shape of list change injection makes
// (compat §1.13), which is what lets the patch address the original indices directly. Its elements
// point into the injection plan: a container is a 408-byte struct, and the patch neither copies nor
// needs the merged list.
type listGrowth[T any] struct {
	origLen  int
	replaced []indexed[T] // ascending by index, at most one per index
	front    []*T
	back     []*T
}

type indexed[T any] struct {
	index int
	value *T
}

func (g *listGrowth[T]) empty() bool {
	return len(g.replaced) == 0 && len(g.front) == 0 && len(g.back) == 0
}

// apply is the list the plan makes of orig, the pod's: the front, orig with its replacements, the
// back; what the patch does to it. The elements are copies.
func (g *listGrowth[T]) apply(orig []T) []T {
	if g.empty() {
		return orig
	}
	out := make([]T, 0, len(g.front)+len(orig)+len(g.back))
	for _, v := range g.front {
		out = append(out, *v)
	}
	start := len(out)
	out = append(out, orig...)
	for _, r := range g.replaced {
		out[start+r.index] = *r.value
	}
	for _, v := range g.back {
		out = append(out, *v)
	}
	return out
}

// size is how many operations appendOps appends.
func (g *listGrowth[T]) size() int {
	switch {
	case g.empty():
		return 0
	case g.origLen == 0:
		return 1
	}
	return len(g.replaced) + len(g.front) + len(g.back)
}

// appendOps appends the operations that address the original list. Replacements come first, while
// original indices are still valid; appends use "-" so they do not depend on the length; front
// insertions go last at 0, 1, … which keeps their relative order. A list that is absent or empty in
// the original JSON (nil, omitempty, or null) cannot be indexed, so it is written whole: nothing to
// replace, front then back.
func (g *listGrowth[T]) appendOps(out []jsonpatch.JsonPatchOperation, path listPath) []jsonpatch.JsonPatchOperation {
	if g.empty() {
		return out
	}
	if g.origLen == 0 {
		return append(out, opAdd(path.list, append(slices.Clip(g.front), g.back...)))
	}
	for _, r := range g.replaced {
		out = append(out, opReplace(path.list+"/"+strconv.Itoa(r.index), r.value))
	}
	for _, v := range g.back {
		out = append(out, opAdd(path.end, v))
	}
	for i, v := range g.front {
		out = append(out, opAdd(path.list+"/"+strconv.Itoa(i), v))
	}
	return out
}

// annotationOps appends to out the keys whose final value differs from the original. Annotations are
// only ever set by injection, never removed, so add/replace per key is the whole story; an absent
// (or empty, hence omitted) map is written whole because its members cannot be addressed.
func annotationOps(out []jsonpatch.JsonPatchOperation, orig, final map[string]string) []jsonpatch.JsonPatchOperation {
	if len(orig) == 0 {
		if len(final) == 0 {
			return out
		}
		return append(out, opAdd(pathAnnotations, final))
	}
	// Only the changed keys are sorted: a pod carries many annotations, injection sets a few, which
	// the buffer holds without growing.
	var buf [8]annotation
	changed := buf[:0]
	for k, v := range final {
		if old, ok := orig[k]; !ok || old != v {
			changed = append(changed, annotation{k, v})
		}
	}
	return appendAnnotationOps(out, orig, changed)
}

// annotation is one annotation as injection sets it.
type annotation struct{ key, value string }

// appendAnnotationOps appends to out the operations that set the changed annotations over orig, a
// map that is not empty, in the order of their keys.
func appendAnnotationOps(out []jsonpatch.JsonPatchOperation, orig map[string]string, changed []annotation) []jsonpatch.JsonPatchOperation {
	slices.SortFunc(changed, func(a, b annotation) int { return strings.Compare(a.key, b.key) })
	for _, a := range changed {
		op := opReplace
		if _, ok := orig[a.key]; !ok {
			op = opAdd
		}
		out = append(out, op(annotationPath(a.key), a.value))
	}
	return out
}
