package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// TestPodLevel covers the transcribed subset of Kubernetes' pod validation (compat §2 step 10). The
// expectations are Kubernetes' (pkg/apis/core/validation), restated.
func TestPodLevel(t *testing.T) {
	c0 := func(f func(c *corev1.Container)) func(ss *v1beta1.SidecarSet) {
		return func(ss *v1beta1.SidecarSet) { f(&ss.Spec.Containers[0].Container) }
	}
	emptyDir := func(name string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	}
	withVolumes := func(vols ...corev1.Volume) func(ss *v1beta1.SidecarSet) {
		return func(ss *v1beta1.SidecarSet) { ss.Spec.Volumes = vols }
	}
	q := resource.MustParse
	httpProbe := func() *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(8080)}}}
	}
	run(t, []validCase{
		// names
		{name: "container name missing", mutate: c0(func(c *corev1.Container) { c.Name = "" }), want: []want{required("spec.containers[0].name")}},
		{name: "container name not a DNS label", mutate: c0(func(c *corev1.Container) { c.Name = "Bad_Name" }), want: []want{invalid("spec.containers[0].name")}},
		{
			name: "duplicate container names",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Containers = append(ss.Spec.Containers, sidecar("test-sidecar"))
			},
			want: []want{duplicate("spec.containers[1].name")},
		},
		{
			// Kubernetes checks initContainers against containers, so the init one is reported.
			name: "initContainer named like a container",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.InitContainers = []v1beta1.SidecarContainer{sidecar("test-sidecar")}
			},
			want: []want{duplicate("spec.initContainers[0].name")},
		},
		// image and enums
		{name: "image missing", mutate: c0(func(c *corev1.Container) { c.Image = "" }), want: []want{required("spec.containers[0].image")}},
		{name: "image with spaces", mutate: c0(func(c *corev1.Container) { c.Image = " nginx" }), want: []want{invalid("spec.containers[0].image")}},
		{
			name:   "unknown imagePullPolicy",
			mutate: c0(func(c *corev1.Container) { c.ImagePullPolicy = "Sometimes" }),
			want:   []want{notSupported("spec.containers[0].imagePullPolicy")},
		},
		{
			name: "imagePullPolicy missing (raw)",
			raw:  true,
			mutate: func(ss *v1beta1.SidecarSet) {
				c := rawSidecar("test-sidecar")
				c.ImagePullPolicy = ""
				ss.Spec.Containers = []v1beta1.SidecarContainer{c}
			},
			want: []want{required("spec.containers[0].imagePullPolicy")},
		},
		{
			name:   "unknown terminationMessagePolicy",
			mutate: c0(func(c *corev1.Container) { c.TerminationMessagePolicy = "Never" }),
			want:   []want{notSupported("spec.containers[0].terminationMessagePolicy")},
		},
		// restartPolicy
		{
			name:   "restartPolicy on a container",
			mutate: c0(func(c *corev1.Container) { c.RestartPolicy = &always }),
			want:   []want{forbidden("spec.containers[0].restartPolicy")},
		},
		{
			name: "restartPolicy other than Always on an initContainer",
			mutate: func(ss *v1beta1.SidecarSet) {
				init := sidecar("init")
				never := corev1.ContainerRestartPolicy("Never")
				init.RestartPolicy = &never
				ss.Spec.InitContainers = []v1beta1.SidecarContainer{init}
			},
			want: []want{notSupported("spec.initContainers[0].restartPolicy")},
		},
		// volumes
		{
			name:   "volume name not a DNS label",
			mutate: withVolumes(emptyDir("Bad")),
			want:   []want{invalid("spec.volumes[0].name")},
		},
		{name: "volume name missing", mutate: withVolumes(emptyDir("")), want: []want{required("spec.volumes[0].name")}},
		{name: "duplicate volume", mutate: withVolumes(emptyDir("v"), emptyDir("v")), want: []want{duplicate("spec.volumes[1].name")}},
		{
			name: "two sources",
			mutate: withVolumes(corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/x"}, EmptyDir: &corev1.EmptyDirVolumeSource{}}}),
			want: []want{forbidden("spec.volumes[0].emptyDir")},
		},
		{
			name:   "hostPath without path, secret without name, negative emptyDir size",
			mutate: withVolumes(corev1.Volume{Name: "a", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{}}}, corev1.Volume{Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}}, corev1.Volume{Name: "c", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr(q("-1Gi"))}}}),
			want:   []want{required("spec.volumes[0].hostPath.path"), required("spec.volumes[1].secret.secretName"), forbidden("spec.volumes[2].emptyDir.sizeLimit")},
		},
		{
			name: "configMap defaultMode out of range, PVC without claim",
			mutate: withVolumes(
				corev1.Volume{Name: "a", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, DefaultMode: ptr(int32(0o1000))}}},
				corev1.Volume{Name: "b", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{}}}),
			want: []want{invalid("spec.volumes[0].configMap.defaultMode"), required("spec.volumes[1].persistentVolumeClaim.claimName")},
		},
		{
			name: "projected token too short-lived",
			mutate: withVolumes(corev1.Volume{Name: "t", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "t", ExpirationSeconds: ptr(int64(60))}}, {}}}}}),
			want: []want{invalid("spec.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds"), required("spec.volumes[0].projected.sources[1]")},
		},
		// mounts and devices
		{
			name:   "mount of an unknown volume, without path",
			mutate: c0(func(c *corev1.Container) { c.VolumeMounts = []corev1.VolumeMount{{Name: "nope"}} }),
			want:   []want{notFound("spec.containers[0].volumeMounts[0].name"), required("spec.containers[0].volumeMounts[0].mountPath")},
		},
		{
			// As in Kubernetes, a mount of an invalid volume is also "not found".
			name: "mount of an invalid volume",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{}}}}
				ss.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "v", MountPath: "/v"}}
			},
			want: []want{required("spec.volumes[0].hostPath.path"), notFound("spec.containers[0].volumeMounts[0].name")},
		},
		{
			name: "mount paths unique, subPath relative",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Volumes = []corev1.Volume{emptyDir("v")}
				ss.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "v", MountPath: "/v"}, {Name: "v", MountPath: "/v", SubPath: "/abs"}}
			},
			want: []want{invalid("spec.containers[0].volumeMounts[1].mountPath"), invalid("spec.containers[0].volumeMounts[1].subPath")},
		},
		{
			name: "device on an emptyDir",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Volumes = []corev1.Volume{emptyDir("v")}
				ss.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "v", DevicePath: "/dev/v"}}
			},
			want: []want{invalid("spec.containers[0].volumeDevices[0].name")},
		},
		{
			name: "same volume as mount and device",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Volumes = []corev1.Volume{pvc("disk0")}
				ss.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "disk0", MountPath: "/data"}}
				ss.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "disk0", DevicePath: "/dev/disk0"}}
			},
			want: []want{invalid("spec.containers[0].volumeMounts[0].name"), invalid("spec.containers[0].volumeDevices[0].name")},
		},
		// ports
		{
			name: "ports",
			mutate: c0(func(c *corev1.Container) {
				c.Ports = []corev1.ContainerPort{
					{Name: "http", ContainerPort: 80},
					{Name: "http", ContainerPort: 70000, Protocol: "HTTP"},
					{Name: "Not_A_Name"},
				}
			}),
			want: []want{
				duplicate("spec.containers[0].ports[1].name"),
				invalid("spec.containers[0].ports[1].containerPort"),
				notSupported("spec.containers[0].ports[1].protocol"),
				invalid("spec.containers[0].ports[2].name"),
				required("spec.containers[0].ports[2].containerPort"),
			},
		},
		// env
		{
			name: "env",
			mutate: c0(func(c *corev1.Container) {
				c.Env = []corev1.EnvVar{
					{Name: "1BAD"},
					{Name: "A=B"},
					{Name: "OK_1.x-y", Value: "v"},
					{Name: "BOTH", Value: "v", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "NONE", ValueFrom: &corev1.EnvVarSource{}},
					{Name: "KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{}}},
				}
			}),
			want: []want{
				invalid("spec.containers[0].env[0].name"),
				invalid("spec.containers[0].env[1].name"),
				invalid("spec.containers[0].env[3].valueFrom"),
				invalid("spec.containers[0].env[4].valueFrom"),
				required("spec.containers[0].env[5].valueFrom.secretKeyRef.name"),
				required("spec.containers[0].env[5].valueFrom.secretKeyRef.key"),
			},
		},
		// resources
		{
			name: "resources",
			mutate: c0(func(c *corev1.Container) {
				c.Resources = corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceCPU: q("100m"), corev1.ResourceMemory: q("-1")},
					Requests: corev1.ResourceList{corev1.ResourceCPU: q("200m"), "gpu": q("1"), "example.com/dev": q("1")},
				}
			}),
			want: []want{
				invalid("spec.containers[0].resources.limits[memory]"),
				invalid("spec.containers[0].resources.requests[cpu]"),
				invalid("spec.containers[0].resources.requests[gpu]"),
				required("spec.containers[0].resources.limits[example.com/dev]"),
			},
		},
		{
			name: "extended resources are whole and not overcommitted",
			mutate: c0(func(c *corev1.Container) {
				c.Resources = corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{"example.com/dev": q("2"), "example.com/half": q("500m")},
					Requests: corev1.ResourceList{"example.com/dev": q("1")},
				}
			}),
			want: []want{invalid("spec.containers[0].resources.limits[example.com/half]"), invalid("spec.containers[0].resources.requests[example.com/dev]")},
		},
		{
			name: "valid resources",
			mutate: c0(func(c *corev1.Container) {
				c.Resources = corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("1Gi"), "hugepages-2Mi": q("2Mi")},
					Requests: corev1.ResourceList{corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q("1Gi"), "hugepages-2Mi": q("2Mi")},
				}
			}),
			want: []want{},
		},
		// probes and lifecycle
		{
			name:   "defaulted liveness and readiness probes are valid",
			mutate: c0(func(c *corev1.Container) { c.LivenessProbe, c.ReadinessProbe = httpProbe(), httpProbe() }),
			want:   []want{},
		},
		{
			// OpenKruise does not default startupProbe, so the httpGet path and scheme stay empty and
			// successThreshold stays 0 (Kubernetes requires 1 there): OpenKruise refuses such a
			// startupProbe too.
			name:   "startupProbe is not defaulted",
			mutate: c0(func(c *corev1.Container) { c.StartupProbe = httpProbe() }),
			want: []want{
				required("spec.containers[0].startupProbe.httpGet.path"),
				notSupported("spec.containers[0].startupProbe.httpGet.scheme"),
				invalid("spec.containers[0].startupProbe.successThreshold"),
			},
		},
		{
			name: "complete startupProbe",
			mutate: c0(func(c *corev1.Container) {
				c.StartupProbe = httpProbe()
				c.StartupProbe.HTTPGet.Path, c.StartupProbe.HTTPGet.Scheme, c.StartupProbe.SuccessThreshold = "/", corev1.URISchemeHTTP, 1
			}),
			want: []want{},
		},
		{
			name: "probe numbers and handler",
			mutate: c0(func(c *corev1.Container) {
				c.LivenessProbe = &corev1.Probe{TimeoutSeconds: -1, SuccessThreshold: 2}
				c.ReadinessProbe = httpProbe()
				c.ReadinessProbe.HTTPGet.Scheme = "FTP"
				c.ReadinessProbe.TerminationGracePeriodSeconds = ptr(int64(5))
			}),
			want: []want{
				required("spec.containers[0].livenessProbe"),
				invalid("spec.containers[0].livenessProbe.timeoutSeconds"),
				invalid("spec.containers[0].livenessProbe.successThreshold"),
				notSupported("spec.containers[0].readinessProbe.httpGet.scheme"),
				invalid("spec.containers[0].readinessProbe.terminationGracePeriodSeconds"),
			},
		},
		{
			name: "lifecycle",
			mutate: c0(func(c *corev1.Container) {
				c.Lifecycle = &corev1.Lifecycle{
					PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{}},
					PreStop: &corev1.LifecycleHandler{
						TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(0)},
						Sleep:     &corev1.SleepAction{Seconds: 1},
					},
				}
			}),
			want: []want{
				required("spec.containers[0].lifecycle.postStart.exec.command"),
				forbidden("spec.containers[0].lifecycle.preStop.sleep"),
				invalid("spec.containers[0].lifecycle.preStop.tcpSocket.port"),
			},
		},
		{
			name: "probes and lifecycle on a plain initContainer",
			mutate: func(ss *v1beta1.SidecarSet) {
				init := sidecar("init")
				init.LivenessProbe = httpProbe()
				init.Lifecycle = &corev1.Lifecycle{}
				ss.Spec.InitContainers = []v1beta1.SidecarContainer{init}
			},
			want: []want{forbidden("spec.initContainers[0].lifecycle"), forbidden("spec.initContainers[0].livenessProbe")},
		},
		{
			name: "probes on a native sidecar",
			mutate: func(ss *v1beta1.SidecarSet) {
				init := sidecar("init")
				init.RestartPolicy = &always
				init.LivenessProbe, init.ReadinessProbe = httpProbe(), httpProbe()
				ss.Spec.InitContainers = []v1beta1.SidecarContainer{init}
			},
			want: []want{},
		},
	})
}
