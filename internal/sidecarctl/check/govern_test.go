package check

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// replicas is how many pods a workload of the input runs, as the impact view counts them.
func TestReplicas(t *testing.T) {
	cloneSet := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "spec": spec}}
	}
	for _, tc := range []struct {
		name string
		obj  runtime.Object
		want int
	}{
		{"a Deployment's replicas", &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}}, 3},
		{"scaled to zero", &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](0)}}, 0},
		{"left out: the API server's default", &appsv1.Deployment{}, 1},
		{"a Pod", &corev1.Pod{}, 1},
		{"a DaemonSet: one pod at least", &appsv1.DaemonSet{}, 1},
		{"OpenKruise's, as written", cloneSet(map[string]any{"replicas": int64(5)}), 5},
		{"not a number", cloneSet(map[string]any{"replicas": "5"}), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, replicas(tc.obj))
		})
	}
}
