package mutation

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/sidecarset/fieldpath"
)

// subPathExprVar finds the $(VAR) references of a volumeMount.subPathExpr; it is OpenKruise's
// SubPathExprEnvReg, so the same variables are copied into the sidecar.
var subPathExprVar = regexp.MustCompile(`\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)`)

// mergeEnv is OpenKruise's MergeEnvVar: names already present win, additions are deduplicated
// among themselves, and duplicates already in base are left as they are (the sidecar author put
// them there).
func mergeEnv(base, additional []corev1.EnvVar) []corev1.EnvVar {
	if len(additional) == 0 {
		return base
	}
	seen := make(map[string]bool, len(base)+len(additional))
	for i := range base {
		seen[base[i].Name] = true
	}
	for _, e := range additional {
		if seen[e.Name] {
			continue
		}
		seen[e.Name] = true
		base = append(base, e)
	}
	return base
}

type envKey struct{ container, name string }

// transferEnvs resolves a sidecar's transferEnv entries against the pod's app containers (compat §1.16,
// S12–S13). Only spec.containers are a source; of duplicate env names in one container the last
// wins, as in OpenKruise's lookup map. Entries whose source container cannot be named are skipped,
// never an error: a pod without the label/annotation simply gets no transferred env. ann are the
// pod's annotations as patched so far, which a fieldRef reads (compat §1.12: metadata first).
func transferEnvs(sc *v1beta1.SidecarContainer, pod *corev1.Pod, ann map[string]string) []corev1.EnvVar {
	if len(sc.TransferEnv) == 0 {
		return nil
	}
	inPod := map[envKey]corev1.EnvVar{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		for _, e := range c.Env {
			inPod[envKey{c.Name, e.Name}] = e
		}
	}
	var out []corev1.EnvVar
	for _, t := range sc.TransferEnv {
		source := t.SourceContainerName
		if t.SourceContainerNameFrom != nil && t.SourceContainerNameFrom.FieldRef != nil {
			name, err := containerNameFromFieldRef(t.SourceContainerNameFrom.FieldRef.FieldPath, ann, pod.Labels)
			if err != nil {
				continue
			}
			source = name
		}
		for _, name := range transferEnvNames(t) {
			if e, ok := inPod[envKey{source, name}]; ok {
				out = append(out, e)
			}
		}
	}
	return out
}

// transferEnvNames is {envName} ∪ envNames, deduplicated and sorted, so the copied env order does
// not depend on how the user listed them.
func transferEnvNames(t v1beta1.TransferEnvVar) []string {
	set := make(map[string]bool, len(t.EnvNames)+1)
	if t.EnvName != "" {
		set[t.EnvName] = true
	}
	for _, n := range t.EnvNames {
		set[n] = true
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// containerNameFromFieldRef reads a container name from metadata.labels['k'] or
// metadata.annotations['k'] (S12); a missing key yields "". Everything else is refused, as the
// downward API conversion OpenKruise validates with would refuse it.
func containerNameFromFieldRef(fieldPath string, annotations, labels map[string]string) (string, error) {
	path, subscript, ok := fieldpath.SplitMaybeSubscripted(fieldPath)
	if !ok {
		return "", fmt.Errorf("unsupported fieldPath %q", fieldPath)
	}
	switch path {
	case "metadata.annotations":
		if errs := validation.IsQualifiedName(strings.ToLower(subscript)); len(errs) != 0 {
			return "", fmt.Errorf("invalid key subscript in %s: %s", fieldPath, strings.Join(errs, ";"))
		}
		return annotations[subscript], nil
	case "metadata.labels":
		if errs := validation.IsQualifiedName(subscript); len(errs) != 0 {
			return "", fmt.Errorf("invalid key subscript in %s: %s", fieldPath, strings.Join(errs, ";"))
		}
		return labels[subscript], nil
	}
	return "", errors.New("fieldPath " + fieldPath + " does not support subscript")
}

// sharedMountsAndEnvs collects, for a sidecar with shareVolumePolicy enabled, every volumeMount of
// the pod's app containers and the env vars their subPathExpr refers to (compat §1.15, W18–W21): a
// shared mount with subPathExpr $(POD_NAME) only resolves in the sidecar if POD_NAME is defined there
// too. Containers already carrying IS_INJECTED are sidecars and are not shared from; init
// containers are never a source. The mounts point into the pod, which injection never modifies:
// the sidecar copies those it takes, and copying them all first was a large part of its bytes.
func sharedMountsAndEnvs(sc *v1beta1.SidecarContainer, pod *corev1.Pod) ([]*corev1.VolumeMount, []corev1.EnvVar) {
	if sc.ShareVolumePolicy.Type != v1beta1.ShareVolumePolicyEnabled {
		return nil, nil
	}
	n := 0
	for i := range pod.Spec.Containers {
		n += len(pod.Spec.Containers[i].VolumeMounts)
	}
	mounts := make([]*corev1.VolumeMount, 0, n)
	var envs []corev1.EnvVar
	for i := range pod.Spec.Containers {
		app := &pod.Spec.Containers[i]
		if IsInjected(app) {
			continue
		}
		for j := range app.VolumeMounts {
			m := &app.VolumeMounts[j]
			mounts = append(mounts, m)
			if !strings.Contains(m.SubPathExpr, "$(") {
				continue // no variable: most mounts, spared the regular expression
			}
			for _, ref := range subPathExprVar.FindAllString(m.SubPathExpr, -1) {
				name := ref[2 : len(ref)-1] // "$(NAME)" → "NAME"
				if e := firstEnv(app, name); e != nil {
					envs = append(envs, *e)
				}
			}
		}
	}
	return mounts, envs
}

func firstEnv(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}
