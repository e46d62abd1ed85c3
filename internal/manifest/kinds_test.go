package manifest

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

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
	"Deployment": `apiVersion: apps/v1
kind: Deployment
metadata:
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
`,
	"StatefulSet": `apiVersion: apps/v1
kind: StatefulSet
metadata:
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
`,
	"DaemonSet": `apiVersion: apps/v1
kind: DaemonSet
metadata:
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
`,
	"ReplicaSet": `apiVersion: apps/v1
kind: ReplicaSet
metadata:
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
`,
	"Job": `apiVersion: batch/v1
kind: Job
metadata:
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
`,
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
