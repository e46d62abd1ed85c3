package fleet

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/controller/rollout"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

// MatchingApp is the app label value the first `matching` SidecarSets of a fleet select.
const MatchingApp = "web"

// SidecarSets builds n defaulted, hashed SidecarSets of which the first `matching` select
// app=MatchingApp. Most are cluster-scoped and select another app, as real SidecarSets do; every
// tenth non-matching one is scoped to a namespace by spec.namespace and every fiftieth selects with
// an In expression, so the generated index meets all of its shapes. Each brings one container with a
// shared volume mount and a ConfigMap volume.
func SidecarSets(n, matching int) ([]*v1beta1.SidecarSet, error) {
	sets := make([]*v1beta1.SidecarSet, 0, n)
	for i := range n {
		app := fmt.Sprintf("svc-%d", i)
		if i < matching {
			app = MatchingApp
		}
		ss := &v1beta1.SidecarSet{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ss-%05d", i), Labels: map[string]string{"team": "platform"}},
			Spec: v1beta1.SidecarSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
				Containers: []v1beta1.SidecarContainer{{
					Container: corev1.Container{
						Name:         fmt.Sprintf("agent-%d", i),
						Image:        "example.com/agent:1.0",
						Env:          []corev1.EnvVar{{Name: "MODE", Value: "sidecar"}},
						VolumeMounts: []corev1.VolumeMount{{Name: "agent-config", MountPath: "/etc/agent"}},
					},
					ShareVolumePolicy: v1beta1.ShareVolumePolicy{Type: v1beta1.ShareVolumePolicyEnabled},
				}},
				Volumes: []corev1.Volume{{Name: "agent-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "agent-config"}}}}},
			},
		}
		switch {
		case i%10 == 9 && i >= matching:
			ss.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{v1beta1.NamespaceNameLabel: fmt.Sprintf("ns-%d", i%7)}}
		case i%50 == 49 && i >= matching:
			ss.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{app, app + "-canary"}}}}
		}
		if err := defaults.SidecarSetAndHash(ss); err != nil {
			return nil, fmt.Errorf("SidecarSet %s: %w", ss.Name, err)
		}
		sets = append(sets, ss)
	}
	return sets, nil
}

// Pod is the pod the benchmarks admit: a Deployment's pod named by generateName, labelled
// app=MatchingApp, in namespace "shop", with one app container, an env var and a log volume the
// fleet's sidecars share.
func Pod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "web-7d9c8-", Namespace: "shop",
			Labels:      map[string]string{"app": MatchingApp, "pod-template-hash": "7d9c8", "version": "v3"},
			Annotations: map[string]string{"prometheus.io/scrape": "true"},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "web", Image: "nginx:1.27",
				Ports:        []corev1.ContainerPort{{ContainerPort: 8080}},
				Env:          []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}},
				VolumeMounts: []corev1.VolumeMount{{Name: "logs", MountPath: "/var/log/nginx"}},
			}},
			Volumes: []corev1.Volume{{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
}

// Revision is the ControllerRevision of ss's spec as the controller writes it first, in namespace.
func Revision(ss *v1beta1.SidecarSet, namespace string) (*appsv1.ControllerRevision, error) {
	return rollout.NewRevision(ss, namespace, 1, 0)
}
