package validation

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestPodSpec(t *testing.T) {
	container := func(name, image string) corev1.Container {
		return corev1.Container{Name: name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
			TerminationMessagePolicy: corev1.TerminationMessageReadFile}
	}
	valid := corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{container("main", "web:1")}}
	valid.Containers[0].Env = []corev1.EnvVar{{Name: "app.config-path", Value: "x"}} // relaxed names
	assert.Empty(t, PodSpec(&valid, field.NewPath("spec")))

	bad := corev1.PodSpec{
		RestartPolicy:       "Sometimes",
		Containers:          []corev1.Container{container("main", "web:1"), container("main", "")},
		InitContainers:      []corev1.Container{container("main", "init:1")},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "main"}}},
		Volumes:             []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}
	bad.Containers[0].ImagePullPolicy = "Allways"
	bad.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "nope", MountPath: "/x"}}
	bad.Containers[0].Env = []corev1.EnvVar{{Name: "A=B"}}
	var got []string
	for _, e := range PodSpec(&bad, field.NewPath("spec")) {
		got = append(got, e.Error())
	}
	assert.Equal(t, []string{
		`spec.containers[0].imagePullPolicy: Unsupported value: "Allways": supported values: "Always", "IfNotPresent", "Never"`,
		`spec.containers[0].env[0].name: Invalid value: "A=B": a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')`,
		`spec.containers[0].volumeMounts[0].name: Not found: "nope"`,
		`spec.containers[1].name: Duplicate value: "main"`,
		`spec.containers[1].image: Required value`,
		`spec.initContainers[0].name: Duplicate value: "main"`,
		`spec.ephemeralContainers[0].name: Duplicate value: "main"`,
		`spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"`,
	}, got)

	assert.Equal(t, "spec.containers: Required value", PodSpec(&corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever}, field.NewPath("spec"))[0].Error())
}
