package managed

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// Pods and Filter are two ways to one answer: every pod Pods lists passes Filter, and every pod
// Filter accepts is listed. The cases are compat §3.3's: the pod selector, the namespace scope in
// its three forms, and the pods that are selected but not managed (not injected by the SidecarSet,
// missing one of its containers, terminating).
func TestPodsAndFilterAgree(t *testing.T) {
	namespaces := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"team": "a"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Labels: map[string]string{"team": "b"}}},
	}
	pod := func(ns, name string, change func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web"},
				Annotations: map[string]string{v1beta1.SidecarSetListAnnotation: "log"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}, {Name: "log"}}},
		}
		if change != nil {
			change(p)
		}
		return p
	}
	now := metav1.Now()
	pods := []*corev1.Pod{
		pod("team-a", "web-1", nil),
		pod("team-b", "web-2", nil),
		pod("team-a", "other", func(p *corev1.Pod) { p.Labels["app"] = "other" }),
		pod("team-a", "not-injected", func(p *corev1.Pod) { p.Annotations[v1beta1.SidecarSetListAnnotation] = "metrics" }),
		pod("team-b", "no-sidecar", func(p *corev1.Pod) { p.Spec.Containers = p.Spec.Containers[:1] }),
		pod("team-b", "terminating", func(p *corev1.Pod) { p.DeletionTimestamp, p.Finalizers = &now, []string{"hold"} }),
	}
	objs := append([]client.Object{}, namespaces...)
	for _, p := range pods {
		objs = append(objs, p)
	}
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()

	for _, tc := range []struct {
		name              string
		namespaceSelector *metav1.LabelSelector
		want              []string
	}{
		{"every namespace", nil, []string{"team-a/web-1", "team-b/web-2"}},
		{"one namespace by name", v1beta1.NamespaceNamed("team-b"), []string{"team-b/web-2"}},
		{"namespaces by label", &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}, []string{"team-a/web-1"}},
		{"no namespace selected", &metav1.LabelSelector{MatchLabels: map[string]string{"team": "c"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ss := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "log"}}
			ss.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
			ss.Spec.NamespaceSelector = tc.namespaceSelector
			ss.Spec.Containers = []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "log"}}}

			listed, err := Pods(ctx, c, ss)
			require.NoError(t, err)
			var got []string
			for _, p := range listed {
				got = append(got, p.Namespace+"/"+p.Name)
			}
			assert.ElementsMatch(t, tc.want, got)

			manages, err := Filter(ctx, c, ss)
			require.NoError(t, err)
			var accepted []string
			for _, p := range pods {
				ok, err := manages(p)
				require.NoError(t, err)
				if ok {
					accepted = append(accepted, p.Namespace+"/"+p.Name)
				}
			}
			assert.ElementsMatch(t, tc.want, accepted)
		})
	}
}

// A selector that does not parse is an error naming the field, not an empty list.
func TestPodsBadSelector(t *testing.T) {
	ss := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "log"}}
	ss.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
	c := fake.NewClientBuilder().Build()
	_, err := Pods(context.Background(), c, ss)
	assert.ErrorContains(t, err, "spec.selector")
	_, err = Filter(context.Background(), c, ss)
	assert.ErrorContains(t, err, "spec.selector")
}
