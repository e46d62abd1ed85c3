package manifest

import (
	"fmt"
	"maps"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// kind is one object kind the CLI understands. template is nil for kinds that are not workloads;
// for workloads it returns the metadata and spec that become the pods' (for a Pod, its own).
type kind struct {
	gvk      schema.GroupVersionKind
	proto    runtime.Object
	template func(runtime.Object) (*metav1.ObjectMeta, *corev1.PodSpec)
}

// kinds is the only place that knows which kinds exist and where their pod templates live: the
// scheme, decoding, template views and write-back are all derived from it.
var kinds = []kind{
	{gvk: v1beta1.GroupVersion.WithKind("SidecarSet"), proto: &v1beta1.SidecarSet{}},
	{gvk: corev1.SchemeGroupVersion.WithKind("Namespace"), proto: &corev1.Namespace{}},
	{gvk: appsv1.SchemeGroupVersion.WithKind("ControllerRevision"), proto: &appsv1.ControllerRevision{}},
	{gvk: corev1.SchemeGroupVersion.WithKind("ConfigMap"), proto: &corev1.ConfigMap{}},
	{gvk: corev1.SchemeGroupVersion.WithKind("Pod"), proto: &corev1.Pod{},
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodSpec) {
			p := o.(*corev1.Pod)
			return &p.ObjectMeta, &p.Spec
		}},
	{gvk: appsv1.SchemeGroupVersion.WithKind("Deployment"), proto: &appsv1.Deployment{},
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodSpec) {
			return podTemplate(&o.(*appsv1.Deployment).Spec.Template)
		}},
	{gvk: appsv1.SchemeGroupVersion.WithKind("StatefulSet"), proto: &appsv1.StatefulSet{},
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodSpec) {
			return podTemplate(&o.(*appsv1.StatefulSet).Spec.Template)
		}},
	{gvk: appsv1.SchemeGroupVersion.WithKind("DaemonSet"), proto: &appsv1.DaemonSet{},
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodSpec) {
			return podTemplate(&o.(*appsv1.DaemonSet).Spec.Template)
		}},
	{gvk: appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), proto: &appsv1.ReplicaSet{},
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodSpec) {
			return podTemplate(&o.(*appsv1.ReplicaSet).Spec.Template)
		}},
	{gvk: batchv1.SchemeGroupVersion.WithKind("Job"), proto: &batchv1.Job{},
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodSpec) {
			return podTemplate(&o.(*batchv1.Job).Spec.Template)
		}},
	{gvk: batchv1.SchemeGroupVersion.WithKind("CronJob"), proto: &batchv1.CronJob{},
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodSpec) {
			return podTemplate(&o.(*batchv1.CronJob).Spec.JobTemplate.Spec.Template)
		}},
}

func podTemplate(t *corev1.PodTemplateSpec) (*metav1.ObjectMeta, *corev1.PodSpec) {
	return &t.ObjectMeta, &t.Spec
}

// listGVK is v1/List, which is not an object of its own: its items are expanded in place.
var listGVK = corev1.SchemeGroupVersion.WithKind("List")

var (
	scheme   = runtime.NewScheme()
	kindsByT = map[reflect.Type]*kind{}
)

func init() {
	for i := range kinds {
		k := &kinds[i]
		scheme.AddKnownTypeWithName(k.gvk, k.proto)
		kindsByT[reflect.TypeOf(k.proto)] = k
	}
	scheme.AddKnownTypeWithName(listGVK, &corev1.List{})
}

// kindOf looks objects up by Go type rather than by TypeMeta, so that objects built in code
// without apiVersion/kind work too.
func kindOf(obj runtime.Object) (*kind, bool) {
	if obj == nil {
		return nil, false
	}
	k, ok := kindsByT[reflect.TypeOf(obj)]
	if !ok || reflect.ValueOf(obj).IsNil() {
		return nil, false
	}
	return k, true
}

// IsWorkload reports whether obj has a pod template: a Pod, Deployment, StatefulSet, DaemonSet,
// ReplicaSet, Job or CronJob.
func IsWorkload(obj runtime.Object) bool {
	k, ok := kindOf(obj)
	return ok && k.template != nil
}

// PodTemplate returns the pod that obj creates, as the injection webhook would see it: a deep copy
// of the template's metadata and spec (a Pod's own, without status) in the effective namespace —
// obj's namespace, else the template's, else defaultNamespace. ok is false when obj is not a
// workload.
func PodTemplate(obj runtime.Object, defaultNamespace string) (pod *corev1.Pod, ok bool) {
	k, ok := kindOf(obj)
	if !ok || k.template == nil {
		return nil, false
	}
	meta, spec := k.template(obj)
	pod = &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: *meta.DeepCopy(),
		Spec:       *spec.DeepCopy(),
	}
	pod.Namespace = defaultNamespace
	if ns := obj.(metav1.Object).GetNamespace(); ns != "" {
		pod.Namespace = ns
	} else if meta.Namespace != "" {
		pod.Namespace = meta.Namespace
	}
	return pod, true
}

// SetPodTemplate writes an injected pod back into obj's pod template: labels, annotations and spec.
// The namespace is not written back, because PodTemplate may have filled it in from a default the
// manifest never said.
func SetPodTemplate(obj runtime.Object, pod *corev1.Pod) error {
	k, ok := kindOf(obj)
	if !ok || k.template == nil {
		return fmt.Errorf("manifest: %T is not a workload", obj)
	}
	if pod == nil {
		return fmt.Errorf("manifest: no pod to write into %T", obj)
	}
	meta, spec := k.template(obj)
	meta.Labels = maps.Clone(pod.Labels)
	meta.Annotations = maps.Clone(pod.Annotations)
	*spec = *pod.Spec.DeepCopy()
	return nil
}

// gvkOf returns obj's kind from the table, for objects that carry no TypeMeta.
func gvkOf(obj runtime.Object) (schema.GroupVersionKind, bool) {
	if k, ok := kindOf(obj); ok {
		return k.gvk, true
	}
	return schema.GroupVersionKind{}, false
}

func supportedKinds() []schema.GroupVersionKind {
	gvks := make([]schema.GroupVersionKind, 0, len(kinds)+1)
	for _, k := range kinds {
		gvks = append(gvks, k.gvk)
	}
	return append(gvks, listGVK)
}
