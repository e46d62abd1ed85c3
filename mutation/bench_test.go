package mutation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// BenchmarkInject injects two SidecarSets into a typical pod: a mesh-like one (init container,
// Before sidecar with hot upgrade, secrets, metadata patch) and a logging one (shared volumes,
// transferEnv, a catalogue volume, resourcesPolicy).
func BenchmarkInject(b *testing.B) {
	pod := podP1()
	pod.Annotations = map[string]string{"team": "payments"}
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
		Name: "worker", Image: "worker:2",
		Env: []corev1.EnvVar{env("LOG_LEVEL", "info")},
		Resources: corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
	})

	mesh := ss1()
	mesh.Spec.Containers = mesh.Spec.Containers[:1]
	mesh.Spec.Containers[0].UpgradeStrategy = v1beta1.SidecarContainerUpgradeStrategy{UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "empty:1"}
	mesh.Spec.ImagePullSecrets = secrets("registry")
	mesh.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"mesh/enabled": "true"}}}

	logging := newSidecarSet("logging", "lg7x")
	agent := sc("log-agent", "log-agent:1.0", v1beta1.AfterAppContainerType)
	agent.ShareVolumePolicy.Type = v1beta1.ShareVolumePolicyEnabled
	agent.VolumeMounts = []corev1.VolumeMount{mount("log-config", "/etc/agent")}
	agent.TransferEnv = []v1beta1.TransferEnvVar{{SourceContainerName: "worker", EnvName: "LOG_LEVEL"}}
	agent.ResourcesPolicy = &v1beta1.ResourcesPolicy{TargetContainersMode: v1beta1.TargetContainersModeSum, TargetContainersNameRegex: ".*",
		ResourcesExpr: v1beta1.ResourcesExpr{
			Limits:   &v1beta1.ResourceExprLimits{CPU: "max(cpu*20%, 50m)", Memory: "memory*10%"},
			Requests: &v1beta1.ResourceExprRequests{CPU: "cpu*10%", Memory: "64Mi"},
		}}
	logging.Spec.Containers = []v1beta1.SidecarContainer{agent}
	logging.Spec.Volumes = []corev1.Volume{volume("log-config")}

	inj := fixedInjector()
	input := Input{Pod: pod, SidecarSets: []*v1beta1.SidecarSet{logging, mesh}}
	if _, err := inj.Inject(input); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := inj.Inject(input); err != nil {
			b.Fatal(err)
		}
	}
}
