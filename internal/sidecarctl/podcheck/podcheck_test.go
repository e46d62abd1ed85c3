package podcheck

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/findings"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/workspace"
)

// mesh injects the sidecar proxy, which mounts the volume certs.
var mesh = &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "mesh"}, Spec: v1beta1.SidecarSetSpec{
	Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "proxy:1",
		VolumeMounts: []corev1.VolumeMount{{Name: "certs", MountPath: "/certs"}}}}},
	Volumes: []corev1.Volume{
		{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "mesh-certs"}}},
		{Name: "unmounted", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	},
}}

func deployment(spec corev1.PodSpec) *manifest.Object {
	d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: spec}}}
	return &manifest.Object{Position: manifest.Position{Source: "web.yaml", Doc: 1, Item: -1}, Obj: d}
}

// What the API server refuses of a workload's pods is named at the workload's field as written; a
// problem in what the injection added names the sidecar and its SidecarSet, at its place in the
// injected pod; the restartPolicy a kind's template allows is the kind's.
func TestProblems(t *testing.T) {
	w := &workspace.Workspace{SidecarSets: []*v1beta1.SidecarSet{mesh}}
	app := corev1.Container{Name: "app", Image: "app:1"}
	sidecar := corev1.Container{Name: "proxy", Image: "proxy:1"}
	for _, tc := range []struct {
		name     string
		before   corev1.PodSpec
		after    func(corev1.PodSpec) corev1.PodSpec
		injected []string
		want     []string
	}{
		{name: "a valid pod", before: corev1.PodSpec{Containers: []corev1.Container{app}}},
		{name: "a written container after a sidecar keeps its written index",
			before: corev1.PodSpec{Containers: []corev1.Container{app, {Name: "bad name", Image: "x"}}},
			after: func(s corev1.PodSpec) corev1.PodSpec {
				s.Containers = append([]corev1.Container{sidecar}, s.Containers...)
				return s
			},
			injected: []string{"mesh"},
			want:     []string{"spec.template.spec.containers[1].name"}},
		{name: "a sidecar's problem names it and its SidecarSet",
			before: corev1.PodSpec{Containers: []corev1.Container{app}},
			after: func(s corev1.PodSpec) corev1.PodSpec {
				bad := sidecar
				bad.Ports = []corev1.ContainerPort{{ContainerPort: -1}}
				s.Containers = append(s.Containers, bad)
				return s
			},
			injected: []string{"mesh"},
			want:     []string{"spec.template.spec.containers[1].ports[0].containerPort: (container proxy, injected by SidecarSet/mesh)"}},
		{name: "a Deployment's pods restart Always",
			before: corev1.PodSpec{Containers: []corev1.Container{app}, RestartPolicy: corev1.RestartPolicyNever},
			want:   []string{"spec.template.spec.restartPolicy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := deployment(tc.before)
			before := &corev1.Pod{Spec: tc.before}
			after := before.DeepCopy()
			if tc.after != nil {
				after.Spec = tc.after(*after.Spec.DeepCopy())
			}
			var got []string
			for _, e := range Problems(w, o, before, after, tc.injected) {
				assert.Equal(t, "Deployment", e.Kind)
				s := e.Field
				if i := strings.Index(e.Reason, " (container "); i >= 0 {
					s += ": " + e.Reason[i+1:]
				}
				got = append(got, s)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// A workload volume shadows a sidecar's only when a sidecar mounts it and the definitions differ
// (as Kubernetes defaults them); the finding is also about the SidecarSet, whose annotation may
// silence it.
func TestShadowedVolumes(t *testing.T) {
	origin := &manifest.Object{Position: manifest.Position{Source: "mesh.yaml", Doc: 1, Item: -1}, Obj: mesh}
	w := &workspace.Workspace{SidecarSets: []*v1beta1.SidecarSet{mesh}, Origin: map[*v1beta1.SidecarSet]*manifest.Object{mesh: origin}}
	secret := func(name string, mode *int32) corev1.VolumeSource {
		return corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name, DefaultMode: mode}}
	}
	defaultMode := corev1.SecretVolumeSourceDefaultMode
	for _, tc := range []struct {
		name     string
		volumes  []corev1.Volume
		injected []string
		want     []string
	}{
		{"another definition", []corev1.Volume{{Name: "certs", VolumeSource: secret("mine", nil)}}, []string{"mesh"},
			[]string{"spec.template.spec.volumes[0]"}},
		{"the same one, defaulted alike", []corev1.Volume{{Name: "certs", VolumeSource: secret("mesh-certs", &defaultMode)}}, []string{"mesh"}, nil},
		{"a volume no sidecar mounts", []corev1.Volume{{Name: "unmounted", VolumeSource: secret("x", nil)}}, []string{"mesh"}, nil},
		{"not injected", []corev1.Volume{{Name: "certs", VolumeSource: secret("mine", nil)}}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := deployment(corev1.PodSpec{Volumes: tc.volumes})
			var got []string
			for _, f := range ShadowedVolumes(w, o, &corev1.Pod{Spec: corev1.PodSpec{Volumes: tc.volumes}}, tc.injected) {
				assert.Equal(t, findings.RuleShadowedVolume, f.Rule)
				assert.Same(t, origin, f.Also)
				assert.Empty(t, f.Severity, "--strict's to give")
				assert.Contains(t, f.Reason, "which its container proxy mounts")
				got = append(got, f.Field)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestTemplateField(t *testing.T) {
	pod := &manifest.Object{Obj: &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}}
	assert.Equal(t, "spec.volumes[0]", TemplateField(pod, "spec.volumes[0]"), "a Pod's own fields")
	assert.Equal(t, "spec.template.spec.volumes[0]", TemplateField(deployment(corev1.PodSpec{}), "spec.volumes[0]"))
}
