package mutation

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// hotUpgradeTwins turns a fully built HotUpgrade sidecar into its two pod containers (compat §1.20,
// W31, W39): <name>-1 works with the real image, <name>-2 idles on hotUpgradeEmptyImage until the
// controller upgrades into it. Both read their own and their twin's version from annotations, which
// is how a sidecar learns during an upgrade whether it is the new or the old process.
func hotUpgradeTwins(sc *v1beta1.SidecarContainer, ann map[string]string, working map[string]string) (first, second placed) {
	name1, name2 := sc.Name+"-1", sc.Name+"-2"

	c1 := sc.Container.DeepCopy()
	c1.Name = name1
	c1.Env = append(c1.Env, versionEnvs(name1)...)

	c2 := sc.Container.DeepCopy()
	c2.Name = name2
	c2.Image = sc.UpgradeStrategy.HotUpgradeEmptyImage
	c2.Env = append(c2.Env, versionEnvs(name2)...)

	// "1"/"0" mean freshly injected: the working twin is at version 1, the empty one at 0.
	ann[v1beta1.SidecarSetVersionAnnotationPrefix+name1] = "1"
	ann[v1beta1.SidecarSetVersionAltAnnotationPrefix+name1] = "0"
	ann[v1beta1.SidecarSetVersionAnnotationPrefix+name2] = "0"
	ann[v1beta1.SidecarSetVersionAltAnnotationPrefix+name2] = "1"
	working[sc.Name] = name1

	return placed{container: c1, policy: sc.PodInjectPolicy}, placed{container: c2, policy: sc.PodInjectPolicy}
}

// versionEnvs are appended after all other env, not merged, as OpenKruise does: should the sidecar
// define SIDECARSET_VERSION itself, the kubelet lets the later definition win, so the twin still
// sees its real version.
func versionEnvs(podContainerName string) []corev1.EnvVar {
	return []corev1.EnvVar{
		annotationEnv(v1beta1.SidecarSetVersionEnv, v1beta1.SidecarSetVersionAnnotationPrefix+podContainerName),
		annotationEnv(v1beta1.SidecarSetVersionAltEnv, v1beta1.SidecarSetVersionAltAnnotationPrefix+podContainerName),
	}
}

func annotationEnv(name, annotation string) corev1.EnvVar {
	return corev1.EnvVar{
		Name: name,
		ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + annotation + "']"},
		},
	}
}
