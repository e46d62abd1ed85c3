package defaults

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

func TestImagePullPolicy(t *testing.T) {
	cases := []struct {
		image string
		want  corev1.PullPolicy
	}{
		{"nginx", corev1.PullAlways},
		{"nginx:latest", corev1.PullAlways},
		{"nginx:1.25", corev1.PullIfNotPresent},
		{"library/nginx", corev1.PullAlways},
		{"docker.io/library/nginx:latest", corev1.PullAlways},
		{"index.docker.io/nginx", corev1.PullAlways},
		// A registry port is not a tag.
		{"registry.local:5000/team/img", corev1.PullAlways},
		{"registry.local:5000/team/img:2.0", corev1.PullIfNotPresent},
		{"registry.local:5000/team/img:latest", corev1.PullAlways},
		{"localhost/img", corev1.PullAlways},
		{"localhost:5000/img:v1", corev1.PullIfNotPresent},
		{"[::1]:5000/img", corev1.PullAlways},
		// A digest alone means "no tag", hence not "latest".
		{"nginx@sha256:" + sha, corev1.PullIfNotPresent},
		{"registry.local:5000/img@sha256:" + sha, corev1.PullIfNotPresent},
		// Tag and digest: the tag decides.
		{"nginx:latest@sha256:" + sha, corev1.PullAlways},
		{"nginx:1.0@sha256:" + sha, corev1.PullIfNotPresent},
		// Tags are case-sensitive.
		{"nginx:LATEST", corev1.PullIfNotPresent},
		// Unparsable references have no tag (Kubernetes ignores the parse error).
		{"", corev1.PullIfNotPresent},
		{"Nginx", corev1.PullIfNotPresent},
		{"nginx:", corev1.PullIfNotPresent},
		{"nginx:latest@sha256:abc", corev1.PullIfNotPresent},
		{"nginx:latest@md5:" + sha, corev1.PullIfNotPresent},
		{"nginx:latest@sha256:" + "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855", corev1.PullIfNotPresent},
		{sha, corev1.PullIfNotPresent},
		{"a//b", corev1.PullIfNotPresent},
		{"-nginx", corev1.PullIfNotPresent},
	}
	for _, tc := range cases {
		t.Run(tc.image, func(t *testing.T) {
			c := corev1.Container{Image: tc.image}
			Container(&c)
			assert.Equal(t, tc.want, c.ImagePullPolicy)
		})
	}
}

func TestContainerKeepsSetValues(t *testing.T) {
	c := corev1.Container{
		Image:                    "nginx",
		ImagePullPolicy:          corev1.PullNever,
		TerminationMessagePath:   "/tmp/msg",
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	want := *c.DeepCopy()
	Container(&c)
	assert.Equal(t, want, c)
}

func TestContainerTerminationMessage(t *testing.T) {
	c := corev1.Container{Image: "a:1"}
	Container(&c)
	assert.Equal(t, "/dev/termination-log", c.TerminationMessagePath)
	assert.Equal(t, corev1.TerminationMessageReadFile, c.TerminationMessagePolicy)
}

func TestContainerPortsProtocol(t *testing.T) {
	c := corev1.Container{Ports: []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}}}
	Container(&c)
	assert.Equal(t, corev1.ProtocolTCP, c.Ports[0].Protocol)
	assert.Equal(t, corev1.ProtocolUDP, c.Ports[1].Protocol)
}

func TestContainerEnvFieldRef(t *testing.T) {
	c := corev1.Container{Env: []corev1.EnvVar{
		{Name: "PLAIN", Value: "x"},
		{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}},
		{Name: "NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "KEPT", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "metadata.name"}}},
	}}
	Container(&c)
	assert.Nil(t, c.Env[0].ValueFrom)
	assert.Nil(t, c.Env[1].ValueFrom.FieldRef)
	assert.Equal(t, "v1", c.Env[2].ValueFrom.FieldRef.APIVersion)
	assert.Equal(t, "v2", c.Env[3].ValueFrom.FieldRef.APIVersion)
}

func TestContainerResources(t *testing.T) {
	c := corev1.Container{Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("0.0001"),
			corev1.ResourceMemory: resource.MustParse("100Mi"),
		},
	}}
	Container(&c)
	cpu := c.Resources.Limits[corev1.ResourceCPU]
	assert.Equal(t, "1m", cpu.String(), "rounded up to milli precision")
	mem := c.Resources.Limits[corev1.ResourceMemory]
	assert.Equal(t, "100Mi", mem.String())
	// Requests are not defaulted from limits: that is SetDefaults_Pod, not applied to SidecarSets.
	assert.Nil(t, c.Resources.Requests)
}

func TestContainerProbes(t *testing.T) {
	defaulted := corev1.Probe{TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
	c := corev1.Container{
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(8080)}}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
			PeriodSeconds: 5, FailureThreshold: 7,
		},
		StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(8080)}}},
	}
	Container(&c)

	want := defaulted
	want.HTTPGet = &corev1.HTTPGetAction{Path: "/", Scheme: corev1.URISchemeHTTP, Port: intstr.FromInt32(8080)}
	assert.Equal(t, want, *c.LivenessProbe)

	want = defaulted
	want.Exec = &corev1.ExecAction{Command: []string{"true"}}
	want.PeriodSeconds, want.FailureThreshold = 5, 7
	assert.Equal(t, want, *c.ReadinessProbe)

	// OpenKruise leaves startupProbe alone; defaulting it would change the hash.
	assert.Equal(t, corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(8080)}}}, *c.StartupProbe)
}

func TestContainerHTTPGetKeepsSetValues(t *testing.T) {
	c := corev1.Container{LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Scheme: corev1.URISchemeHTTPS},
	}}}
	Container(&c)
	assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	assert.Equal(t, corev1.URISchemeHTTPS, c.LivenessProbe.HTTPGet.Scheme)
}

func TestContainerLifecycle(t *testing.T) {
	c := corev1.Container{Lifecycle: &corev1.Lifecycle{
		PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(1)}},
		PreStop:   &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/stop", Port: intstr.FromInt32(1)}},
	}}
	Container(&c)
	assert.Equal(t, "/", c.Lifecycle.PostStart.HTTPGet.Path)
	assert.Equal(t, corev1.URISchemeHTTP, c.Lifecycle.PostStart.HTTPGet.Scheme)
	assert.Equal(t, "/stop", c.Lifecycle.PreStop.HTTPGet.Path)
	assert.Equal(t, corev1.URISchemeHTTP, c.Lifecycle.PreStop.HTTPGet.Scheme)

	onlyPreStopExec := corev1.Container{Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{}}}}
	Container(&onlyPreStopExec)
	assert.Nil(t, onlyPreStopExec.Lifecycle.PostStart)
}

func TestContainerNil(t *testing.T) {
	assert.NotPanics(t, func() { Container(nil) })
}
