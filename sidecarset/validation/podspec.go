package validation

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var restartPolicies = []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}

// PodSpec validates the spec of a pod — a workload's pod template once sidecars are injected —
// with the same subset of Kubernetes' pod validation as the SidecarSet's fake pod: at least one
// container; volumes; containers, then initContainers, named uniquely across both and the
// ephemeral containers; images, enums, ports, environment, mounts of existing volumes, resources,
// probes; and the restartPolicy. It is what sidecarctl can say, without k8s.io/kubernetes, about
// a pod the API server would refuse. spec must be defaulted as the API server defaults it.
//
// Environment variable names are Kubernetes' current rule (printable ASCII but '='; the
// RelaxedEnvironmentVariableValidation gate is on by default since 1.32), not the C identifiers
// OpenKruise holds sidecars to: a pod's own names are not OpenKruise's business.
func PodSpec(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(spec.Containers) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("containers"), ""))
	}
	vols, errs := validateVolumes(spec.Volumes, fldPath.Child("volumes"))
	allErrs = append(allErrs, errs...)
	names := map[string]bool{}
	for i := range spec.Containers {
		allErrs = append(allErrs, validateContainer(&spec.Containers[i], containerRegular, vols, names, fldPath.Child("containers").Index(i))...)
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		kind := containerInit
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			kind = containerNativeSidecar
		}
		allErrs = append(allErrs, validateContainer(c, kind, vols, names, fldPath.Child("initContainers").Index(i))...)
	}
	for i := range spec.EphemeralContainers {
		p := fldPath.Child("ephemeralContainers").Index(i).Child("name")
		if n := spec.EphemeralContainers[i].Name; names[n] {
			allErrs = append(allErrs, field.Duplicate(p, n))
		} else {
			names[n] = true
		}
	}
	allErrs = append(allErrs, validateEnum(spec.RestartPolicy, restartPolicies, fldPath.Child("restartPolicy"))...)
	return relaxEnvNames(allErrs)
}

// relaxEnvNames drops the strict-name errors of environment variables whose names Kubernetes
// accepts today.
func relaxEnvNames(errs field.ErrorList) field.ErrorList {
	out := errs[:0]
	for _, e := range errs {
		if name, ok := e.BadValue.(string); ok && e.Type == field.ErrorTypeInvalid &&
			strings.Contains(e.Field, ".env[") && strings.HasSuffix(e.Field, ".name") && relaxedEnvName(name) {
			continue
		}
		out = append(out, e)
	}
	return out
}

func relaxedEnvName(name string) bool {
	for _, r := range name {
		if r < ' ' || r > '~' || r == '=' {
			return false
		}
	}
	return name != ""
}
