package manifest

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gomodulespatch "gomodules.xyz/jsonpatch/v2"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// workload decodes one YAML document that must hold exactly one object.
func workload(t *testing.T, yaml string) runtime.Object {
	t.Helper()
	objs, err := Decode("t.yaml", []byte(yaml))
	require.NoError(t, err)
	require.Len(t, objs, 1)
	return objs[0].Obj
}

const specTemplateYAML = `metadata:
  name: w
  namespace: OBJNS
spec:
  template:
    metadata:
      namespace: tmpl-ns
      labels: {app: web}
      annotations: {a: "1"}
    spec:
      containers: [{name: web, image: nginx}]
`

// workloadYAML holds every workload kind with the same pod: labels app=web, annotation a=1, one
// container web/nginx. Templates other than the Pod's carry the namespace tmpl-ns; OBJNS is replaced
// by the object's namespace (the line is dropped when there is none).
var workloadYAML = map[string]string{
	"Pod": `apiVersion: v1
kind: Pod
metadata:
  name: w
  namespace: OBJNS
  labels: {app: web}
  annotations: {a: "1"}
spec:
  containers: [{name: web, image: nginx}]
`,
	"Deployment":  "apiVersion: apps/v1\nkind: Deployment\n" + specTemplateYAML,
	"StatefulSet": "apiVersion: apps/v1\nkind: StatefulSet\n" + specTemplateYAML,
	"DaemonSet":   "apiVersion: apps/v1\nkind: DaemonSet\n" + specTemplateYAML,
	"ReplicaSet":  "apiVersion: apps/v1\nkind: ReplicaSet\n" + specTemplateYAML,
	"Job":         "apiVersion: batch/v1\nkind: Job\n" + specTemplateYAML,
	"CronJob": `apiVersion: batch/v1
kind: CronJob
metadata:
  name: w
  namespace: OBJNS
spec:
  schedule: "* * * * *"
  jobTemplate:
    metadata:
      labels: {not: the-pod-template}
    spec:
      template:
        metadata:
          namespace: tmpl-ns
          labels: {app: web}
          annotations: {a: "1"}
        spec:
          containers: [{name: web, image: nginx}]
`,
	// OpenKruise's workloads keep their pod template where apps/v1's do.
	"CloneSet":                      "apiVersion: apps.kruise.io/v1alpha1\nkind: CloneSet\n" + specTemplateYAML,
	"Advanced StatefulSet v1beta1":  "apiVersion: apps.kruise.io/v1beta1\nkind: StatefulSet\n" + specTemplateYAML,
	"Advanced StatefulSet v1alpha1": "apiVersion: apps.kruise.io/v1alpha1\nkind: StatefulSet\n" + specTemplateYAML,
	"Advanced DaemonSet":            "apiVersion: apps.kruise.io/v1alpha1\nkind: DaemonSet\n" + specTemplateYAML,
	"BroadcastJob":                  "apiVersion: apps.kruise.io/v1alpha1\nkind: BroadcastJob\n" + specTemplateYAML,
}

func templated(t *testing.T, objectNamespace string) map[string]runtime.Object {
	out := map[string]runtime.Object{}
	for kind, y := range workloadYAML {
		if objectNamespace == "" {
			y = strings.Replace(y, "  namespace: OBJNS\n", "", 1)
		}
		out[kind] = workload(t, strings.Replace(y, "OBJNS", objectNamespace, 1))
	}
	return out
}

func TestPodTemplate(t *testing.T) {
	for _, objectNS := range []string{"", "obj-ns"} {
		for kind, obj := range templated(t, objectNS) {
			t.Run(kind+"/"+objectNS, func(t *testing.T) {
				require.True(t, IsWorkload(obj))
				pod, ok := PodTemplate(obj, "default-ns")
				require.True(t, ok)
				assert.Equal(t, "v1", pod.APIVersion)
				assert.Equal(t, "Pod", pod.Kind)
				assert.Equal(t, map[string]string{"app": "web"}, pod.Labels)
				assert.Equal(t, map[string]string{"a": "1"}, pod.Annotations)
				require.Len(t, pod.Spec.Containers, 1)
				assert.Equal(t, "nginx", pod.Spec.Containers[0].Image)

				// The object's namespace, else the template's, else the default. A Pod is its own
				// template, so it has no second namespace to fall back on.
				wantNS := objectNS
				switch {
				case wantNS != "":
				case kind == "Pod":
					wantNS = "default-ns"
				default:
					wantNS = "tmpl-ns"
				}
				assert.Equal(t, wantNS, pod.Namespace)

				// The view is a copy: changing it leaves the workload alone.
				pod.Labels["app"] = "changed"
				pod.Spec.Containers[0].Image = "changed"
				again, _ := PodTemplate(obj, "default-ns")
				assert.Equal(t, "web", again.Labels["app"])
				assert.Equal(t, "nginx", again.Spec.Containers[0].Image)
			})
		}
	}
}

func TestPodTemplateNamespaceWithoutAny(t *testing.T) {
	obj := workload(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers: [{name: a}]\n")
	pod, ok := PodTemplate(obj, "fallback")
	require.True(t, ok)
	assert.Equal(t, "fallback", pod.Namespace)
}

func TestSetPodTemplate(t *testing.T) {
	for kind, obj := range templated(t, "") {
		t.Run(kind, func(t *testing.T) {
			pod, ok := PodTemplate(obj, "default-ns")
			require.True(t, ok)
			pod.Labels["injected"] = "yes"
			pod.Annotations[v1beta1.SidecarSetListAnnotation] = "logging"
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "log-agent", Image: "fluent-bit"})
			pod.Namespace = "not-written-back"
			require.NoError(t, SetPodTemplate(obj, pod))

			// The copy written back is not shared with the pod.
			pod.Labels["injected"] = "changed"
			pod.Spec.Containers[1].Image = "changed"

			back, ok := PodTemplate(obj, "default-ns")
			require.True(t, ok)
			assert.Equal(t, map[string]string{"app": "web", "injected": "yes"}, back.Labels)
			assert.Equal(t, map[string]string{"a": "1", v1beta1.SidecarSetListAnnotation: "logging"}, back.Annotations)
			require.Len(t, back.Spec.Containers, 2)
			assert.Equal(t, "fluent-bit", back.Spec.Containers[1].Image)
			assert.NotEqual(t, "not-written-back", back.Namespace, "namespace is not written back")

			if cj, ok := obj.(*batchv1.CronJob); ok {
				assert.Equal(t, map[string]string{"not": "the-pod-template"}, cj.Spec.JobTemplate.Labels,
					"a CronJob's pod template is spec.jobTemplate.spec.template, not spec.jobTemplate")
			}

			// And it lands where the kind keeps its template.
			var out strings.Builder
			require.NoError(t, Encode(&out, YAML, obj))
			reread := workload(t, out.String())
			reback, _ := PodTemplate(reread, "")
			assert.Equal(t, back.Spec, reback.Spec)
		})
	}
}

func TestNotWorkloads(t *testing.T) {
	data, err := os.ReadFile("testdata/kinds.yaml")
	require.NoError(t, err)
	objs, err := Decode("kinds.yaml", data)
	require.NoError(t, err)
	for _, o := range objs[:4] { // SidecarSet, Namespace, ControllerRevision, ConfigMap
		assert.False(t, IsWorkload(o.Obj), o.String())
		_, ok := PodTemplate(o.Obj, "")
		assert.False(t, ok)
		assert.ErrorContains(t, SetPodTemplate(o.Obj, &corev1.Pod{}), "is not a workload")
	}
	for _, o := range objs[4:] {
		assert.True(t, IsWorkload(o.Obj), o.String())
	}
	for _, obj := range []runtime.Object{nil, (*appsv1.Deployment)(nil), &corev1.Service{}} {
		assert.False(t, IsWorkload(obj))
		_, ok := PodTemplate(obj, "")
		assert.False(t, ok)
		assert.Error(t, SetPodTemplate(obj, &corev1.Pod{}))
	}
	assert.ErrorContains(t, SetPodTemplate(&appsv1.Deployment{}, nil), "no pod")
}

// OpenKruise's workloads are read as documents: what is not metadata or pod template belongs to
// OpenKruise's CRD, which this module does not know, and must reach the output as written, also
// when a sidecar is written into the template.
func TestOpenKruiseWorkloadKeepsItsFields(t *testing.T) {
	in := `apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 3
  revisionHistoryLimit: 5
  scaleStrategy: {maxUnavailable: 50%, podsToDelete: [web-x]}
  updateStrategy:
    type: InPlaceIfPossible
    partition: 1
    inPlaceUpdateStrategy: {gracePeriodSeconds: 10}
  lifecycle: {preDelete: {labelsHandler: {example.io/block: "true"}}}
  aFieldFromTheFuture: {ratio: 1.5, big: 9007199254740993}
  volumeClaimTemplates: [{metadata: {name: data}, spec: {accessModes: [ReadWriteOnce]}}]
  template:
    metadata:
      labels: {app: web}
    spec:
      containers: [{name: web, image: nginx}]
`
	asJSON := func(t *testing.T, obj runtime.Object) map[string]any {
		t.Helper()
		var m map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(encode(t, JSON, obj)), &m))
		return m
	}
	var want map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(in), &want))

	obj := workload(t, in)
	require.IsType(t, &unstructured.Unstructured{}, obj)
	assert.Equal(t, want, asJSON(t, obj), "read and written unchanged")
	assert.Contains(t, encode(t, JSON, obj), "9007199254740993", "int64 beyond float64 precision")

	pod, ok := PodTemplate(obj, "default")
	require.True(t, ok)
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "agent", Image: "agent:1"})
	pod.Annotations = map[string]string{v1beta1.SidecarSetListAnnotation: "agent"}
	require.NoError(t, SetPodTemplate(obj, pod))
	got := asJSON(t, obj)
	gotSpec, wantSpec := got["spec"].(map[string]any), want["spec"].(map[string]any)
	assert.Equal(t, map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": "web"}, "annotations": map[string]any{v1beta1.SidecarSetListAnnotation: "agent"}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx"}, map[string]any{"name": "agent", "image": "agent:1"}}},
	}, gotSpec["template"], "the template is written as Encode writes typed objects: no resources: {}")
	delete(gotSpec, "template")
	delete(wantSpec, "template")
	assert.Equal(t, want, got, "everything but the template is as written")
}

// Kinds this package does not read are documents handed on as they are.
func TestPassThrough(t *testing.T) {
	for _, in := range []string{
		`{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"}, "spec": {"ports": [{"port": 80, "targetPort": "http"}], "selector": {"app": "web"}}}`,
		`{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "train"}, "spec": {"minAvailable": 2, "tasks": [{"replicas": 2, "template": {"spec": {"containers": [{"name": "t", "image": "t"}]}}}]}}`,
		`{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "UnitedDeployment", "metadata": {"name": "ud"}, "spec": {"template": {"cloneSetTemplate": {}}}}`,
		`{"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": ["a.yaml"]}`,
		`{"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "x"}, "ratio": 0.25, "flag": true, "nothing": null, "list": []}`,
	} {
		obj := workload(t, in)
		t.Run(obj.GetObjectKind().GroupVersionKind().String(), func(t *testing.T) {
			assert.True(t, IsPassThrough(obj))
			assert.False(t, IsWorkload(obj))
			_, ok := PodTemplate(obj, "")
			assert.False(t, ok)
			_, ok = PodTemplatePointer(obj)
			assert.False(t, ok)
			assert.ErrorContains(t, SetPodTemplate(obj, &corev1.Pod{}), "is not a workload")
			assert.JSONEq(t, in, encode(t, JSON, obj))
			again := workload(t, encode(t, YAML, obj))
			assert.JSONEq(t, in, encode(t, JSON, again), "through YAML too")
		})
	}
	for _, obj := range []runtime.Object{&corev1.Pod{}, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet"}}, nil} {
		assert.False(t, IsPassThrough(obj), "%T is read here", obj)
	}
}

// The pointer PodTemplatePointer gives, prefixed to a pod's patch, patches the workload: the patch
// `inject --patch` prints for a workload applies to the workload.
func TestPodTemplatePointer(t *testing.T) {
	wantPointer := map[string]string{"Pod": "", "CronJob": "/spec/jobTemplate/spec/template"}
	for kind, obj := range templated(t, "") {
		t.Run(kind, func(t *testing.T) {
			pointer, ok := PodTemplatePointer(obj)
			require.True(t, ok)
			want, special := wantPointer[kind]
			if !special {
				want = "/spec/template"
			}
			assert.Equal(t, want, pointer)

			pod, _ := PodTemplate(obj, "")
			injected := pod.DeepCopy()
			injected.Spec.Containers = append([]corev1.Container{{Name: "agent", Image: "agent:1"}}, injected.Spec.Containers...)
			injected.Annotations[v1beta1.SidecarSetListAnnotation] = "agent"
			injected.Labels = nil
			before, err := json.Marshal(pod)
			require.NoError(t, err)
			after, err := json.Marshal(injected)
			require.NoError(t, err)
			ops, err := gomodulespatch.CreatePatch(before, after)
			require.NoError(t, err)
			for i := range ops {
				ops[i].Path = pointer + ops[i].Path
			}
			rawOps, err := json.Marshal(ops)
			require.NoError(t, err)
			patch, err := jsonpatch.DecodePatch(rawOps)
			require.NoError(t, err)
			patched, err := patch.Apply([]byte(encode(t, JSON, obj)))
			require.NoError(t, err, string(rawOps))

			// The webhook's patch carries the typed pod's "resources: {}", which SetPodTemplate leaves out:
			// the pods are compared, not the bytes.
			got, ok := PodTemplate(workload(t, string(patched)), "")
			require.True(t, ok)
			injected.Namespace = got.Namespace
			assert.True(t, apiequality.Semantic.DeepEqual(injected, got), "%s\n%+v\n%+v", patched, injected, got)
		})
	}
	for _, obj := range []runtime.Object{&corev1.Namespace{}, nil} {
		_, ok := PodTemplatePointer(obj)
		assert.False(t, ok)
	}
}

// kubectl sends the last of repeated keys; so does everything read here.
func TestDuplicateKeysKeepTheLastValue(t *testing.T) {
	for name, in := range map[string]string{
		"YAML":                  "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {app: x, app: z}\n",
		"JSON":                  `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "x", "app": "z"}}}`,
		"OpenKruise's workload": "apiVersion: apps.kruise.io/v1alpha1\nkind: CloneSet\nmetadata: {name: p}\nspec:\n  template:\n    metadata:\n      labels: {app: x, app: z}\n",
	} {
		t.Run(name, func(t *testing.T) {
			in := DecodeInput("f", []byte(in))
			require.Empty(t, in.Errors)
			require.Len(t, in.Warnings, 1)
			pod, ok := PodTemplate(in.Objects[0].Obj, "")
			require.True(t, ok)
			assert.Equal(t, map[string]string{"app": "z"}, pod.Labels)
		})
	}
}
