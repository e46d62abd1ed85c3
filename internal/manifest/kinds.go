package manifest

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// kind is one object kind the package reads.
type kind struct {
	gvk schema.GroupVersionKind
	// proto is the Go type the document decodes into. OpenKruise's workloads have none: this module
	// does not depend on OpenKruise, so they stay documents (*unstructured.Unstructured) of which only
	// the metadata and the pod template are decoded, and every other field passes through as written.
	proto runtime.Object
	// workload marks the kinds whose pods the webhook injects into. template is then the JSON path
	// of the object that holds the pods' metadata and spec: empty for a Pod, its own template.
	workload bool
	template []string
}

var (
	specTemplate    = []string{"spec", "template"}
	cronJobTemplate = []string{"spec", "jobTemplate", "spec", "template"}
)

// kinds is the only place that knows which kinds exist and where their pod templates live:
// decoding, template views, write-back and patch paths are all derived from it.
var kinds = []kind{
	// SidecarSets in both versions: the caller turns a v1alpha1 one into the hub (package
	// sidecarset/versions), keeping it to name errors by the fields written.
	{gvk: v1alpha1.GroupVersion.WithKind(sidecarSetKind), proto: &v1alpha1.SidecarSet{}},
	{gvk: v1beta1.GroupVersion.WithKind(sidecarSetKind), proto: &v1beta1.SidecarSet{}},
	{gvk: corev1.SchemeGroupVersion.WithKind("Namespace"), proto: &corev1.Namespace{}},
	{gvk: appsv1.SchemeGroupVersion.WithKind("ControllerRevision"), proto: &appsv1.ControllerRevision{}},
	{gvk: corev1.SchemeGroupVersion.WithKind("ConfigMap"), proto: &corev1.ConfigMap{}},
	{gvk: corev1.SchemeGroupVersion.WithKind("Pod"), proto: &corev1.Pod{}, workload: true},
	{gvk: appsv1.SchemeGroupVersion.WithKind("Deployment"), proto: &appsv1.Deployment{}, workload: true, template: specTemplate},
	{gvk: appsv1.SchemeGroupVersion.WithKind("StatefulSet"), proto: &appsv1.StatefulSet{}, workload: true, template: specTemplate},
	{gvk: appsv1.SchemeGroupVersion.WithKind("DaemonSet"), proto: &appsv1.DaemonSet{}, workload: true, template: specTemplate},
	{gvk: appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), proto: &appsv1.ReplicaSet{}, workload: true, template: specTemplate},
	{gvk: batchv1.SchemeGroupVersion.WithKind("Job"), proto: &batchv1.Job{}, workload: true, template: specTemplate},
	{gvk: batchv1.SchemeGroupVersion.WithKind("CronJob"), proto: &batchv1.CronJob{}, workload: true, template: cronJobTemplate},
	// OpenKruise's workloads: CloneSet, Advanced StatefulSet (served as v1beta1 and v1alpha1),
	// Advanced DaemonSet and BroadcastJob.
	{gvk: v1alpha1.GroupVersion.WithKind("CloneSet"), workload: true, template: specTemplate},
	{gvk: v1beta1.GroupVersion.WithKind("StatefulSet"), workload: true, template: specTemplate},
	{gvk: v1alpha1.GroupVersion.WithKind("StatefulSet"), workload: true, template: specTemplate},
	{gvk: v1alpha1.GroupVersion.WithKind("DaemonSet"), workload: true, template: specTemplate},
	{gvk: v1alpha1.GroupVersion.WithKind("BroadcastJob"), workload: true, template: specTemplate},
}

const sidecarSetKind = "SidecarSet"

// listGVK is v1/List, which is not an object of its own: its items are expanded in place.
var listGVK = corev1.SchemeGroupVersion.WithKind("List")

var (
	kindsByT   = map[reflect.Type]*kind{}
	kindsByGVK = map[schema.GroupVersionKind]*kind{}
)

func init() {
	for i := range kinds {
		k := &kinds[i]
		kindsByGVK[k.gvk] = k
		if k.proto != nil {
			kindsByT[reflect.TypeOf(k.proto)] = k
		}
	}
}

// kindOf looks typed objects up by Go type rather than by TypeMeta, so that objects built in code
// without apiVersion/kind work too; documents always carry theirs.
func kindOf(obj runtime.Object) (*kind, bool) {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return nil, false
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		k, ok := kindsByGVK[u.GroupVersionKind()]
		return k, ok
	}
	k, ok := kindsByT[reflect.TypeOf(obj)]
	return k, ok
}

// IsWorkload reports whether obj has a pod template: a Pod, Deployment, StatefulSet, DaemonSet,
// ReplicaSet, Job or CronJob, or one of OpenKruise's CloneSet, Advanced StatefulSet, Advanced
// DaemonSet and BroadcastJob.
func IsWorkload(obj runtime.Object) bool {
	k, ok := kindOf(obj)
	return ok && k.workload
}

// IsPassThrough reports whether obj is a document of a kind this package does not read, kept as
// written so that it can be handed on.
func IsPassThrough(obj runtime.Object) bool {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u == nil {
		return false
	}
	_, known := kindOf(u)
	return !known
}

// PodTemplate returns the pod that obj creates, as the injection webhook would see it: a copy of
// the template's metadata and spec (a Pod's own, without status) in the effective namespace —
// obj's namespace, else the template's, else defaultNamespace. ok is false when obj is not a
// workload.
func PodTemplate(obj runtime.Object, defaultNamespace string) (pod *corev1.Pod, ok bool) {
	k, ok := kindOf(obj)
	if !ok || !k.workload {
		return nil, false
	}
	var tmpl corev1.PodTemplateSpec
	if u, isDoc := obj.(*unstructured.Unstructured); isDoc {
		// Decode checked the template strictly; this reads it again only because the document
		// keeps it as generic JSON.
		raw, err := json.Marshal(templateNode(u.Object, k.template, false))
		if err != nil || kjson.UnmarshalCaseSensitivePreserveInts(raw, &tmpl) != nil {
			return nil, false
		}
	} else {
		meta, spec, err := typedTemplate(obj, k.template)
		if err != nil {
			return nil, false
		}
		tmpl = corev1.PodTemplateSpec{ObjectMeta: *meta.DeepCopy(), Spec: *spec.DeepCopy()}
	}
	pod = &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: tmpl.ObjectMeta,
		Spec:       tmpl.Spec,
	}
	pod.Namespace = defaultNamespace
	if ns := obj.(metav1.Object).GetNamespace(); ns != "" {
		pod.Namespace = ns
	} else if tmpl.Namespace != "" {
		pod.Namespace = tmpl.Namespace
	}
	return pod, true
}

// SetPodTemplate writes an injected pod back into obj's pod template: labels, annotations and spec.
// The namespace is not written back, because PodTemplate may have filled it in from a default the
// manifest never said. In a document (an OpenKruise workload) nothing else changes, and the spec is
// written as Encode writes typed objects.
func SetPodTemplate(obj runtime.Object, pod *corev1.Pod) error {
	k, ok := kindOf(obj)
	if !ok || !k.workload {
		return fmt.Errorf("manifest: %s is not a workload", typeName(obj))
	}
	if pod == nil {
		return fmt.Errorf("manifest: no pod to write into %s", typeName(obj))
	}
	if u, isDoc := obj.(*unstructured.Unstructured); isDoc {
		spec, err := document(&pod.Spec)
		if err != nil {
			return err
		}
		node := templateNode(u.Object, k.template, true)
		meta, ok := node["metadata"].(map[string]any)
		if !ok {
			meta = map[string]any{}
			node["metadata"] = meta
		}
		setStringMap(meta, "labels", pod.Labels)
		setStringMap(meta, "annotations", pod.Annotations)
		node["spec"] = spec
		return nil
	}
	meta, spec, err := typedTemplate(obj, k.template)
	if err != nil {
		return err
	}
	meta.Labels = maps.Clone(pod.Labels)
	meta.Annotations = maps.Clone(pod.Annotations)
	*spec = *pod.Spec.DeepCopy()
	return nil
}

// PodTemplatePointer is where obj keeps its pod template, as an RFC 6901 JSON pointer: prefixed to
// the paths of a patch for obj's pods, it patches obj. It is "" for a Pod.
func PodTemplatePointer(obj runtime.Object) (string, bool) {
	k, ok := kindOf(obj)
	switch {
	case !ok || !k.workload:
		return "", false
	case len(k.template) == 0:
		return "", true
	}
	return "/" + strings.Join(k.template, "/"), true
}

// typedTemplate finds the metadata and spec of a typed workload's template by following path by
// JSON field names, the path the document has them at.
func typedTemplate(obj runtime.Object, path []string) (*metav1.ObjectMeta, *corev1.PodSpec, error) {
	v := reflect.ValueOf(obj).Elem()
	field := func(key string) (reflect.Value, error) {
		f, ok := jsonField(v.Type(), key)
		if !ok {
			return reflect.Value{}, fmt.Errorf("manifest: %s has no field %s", v.Type(), key)
		}
		return v.FieldByIndexErr(f.Index)
	}
	for _, key := range path {
		next, err := field(key)
		if err != nil {
			return nil, nil, err
		}
		v = next
	}
	metaField, err := field("metadata")
	if err != nil {
		return nil, nil, err
	}
	specField, err := field("spec")
	if err != nil {
		return nil, nil, err
	}
	meta, okMeta := metaField.Addr().Interface().(*metav1.ObjectMeta)
	spec, okSpec := specField.Addr().Interface().(*corev1.PodSpec)
	if !okMeta || !okSpec {
		return nil, nil, fmt.Errorf("manifest: %s does not hold a pod template", v.Type())
	}
	return meta, spec, nil
}

// templateNode returns the object at path in a document, creating missing objects on the way when
// create is set (a template that was not written is an empty one, as in a typed object); else nil
// when there is none.
func templateNode(doc map[string]any, path []string, create bool) map[string]any {
	node := doc
	for _, key := range path {
		next, ok := node[key].(map[string]any)
		if !ok {
			if !create {
				return nil
			}
			next = map[string]any{}
			node[key] = next
		}
		node = next
	}
	return node
}

// setStringMap writes m under key as a document holds it, leaving an empty map out as Encode does.
func setStringMap(doc map[string]any, key string, m map[string]string) {
	if len(m) == 0 {
		delete(doc, key)
		return
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	doc[key] = out
}

// gvkOf returns obj's kind: a document's own, or a typed object's from the table, for objects that
// carry no TypeMeta.
func gvkOf(obj runtime.Object) (schema.GroupVersionKind, bool) {
	if u, ok := obj.(*unstructured.Unstructured); ok && u != nil {
		return u.GroupVersionKind(), true
	}
	if k, ok := kindOf(obj); ok {
		return k.gvk, true
	}
	return schema.GroupVersionKind{}, false
}

func typeName(obj runtime.Object) string {
	if gvk, ok := gvkOf(obj); ok {
		return gvk.Kind
	}
	return fmt.Sprintf("%T", obj)
}

// supportedKinds lists the kinds and their apiVersions for error messages.
func supportedKinds() []schema.GroupVersionKind {
	gvks := make([]schema.GroupVersionKind, 0, len(kinds)+1)
	for _, k := range kinds {
		gvks = append(gvks, k.gvk)
	}
	return append(gvks, listGVK)
}

// VolumeClaimTemplates names the volumeClaimTemplates of obj (a StatefulSet, an Advanced
// StatefulSet, a CloneSet): their controllers add a volume of each name to the pods they create,
// which the pod template's mounts may name without declaring it.
func VolumeClaimTemplates(obj runtime.Object) []string {
	var names []string
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		for _, t := range o.Spec.VolumeClaimTemplates {
			names = append(names, t.Name)
		}
	case *unstructured.Unstructured:
		templates, _, _ := unstructured.NestedSlice(o.Object, "spec", "volumeClaimTemplates")
		for _, t := range templates {
			if m, ok := t.(map[string]any); ok {
				if name, _, _ := unstructured.NestedString(m, "metadata", "name"); name != "" {
					names = append(names, name)
				}
			}
		}
	}
	return names
}
