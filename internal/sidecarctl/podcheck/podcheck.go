package podcheck

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/workspace"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
	"github.com/sidecarops/sidecarops/sidecarset/validation"
)

// restartPoliciesOf are the pod restartPolicies the API server's validation of each workload
// kind allows in its template (after defaulting, which makes an empty one Always); a kind not
// listed (Pod, StatefulSet) allows what a pod does.
var restartPoliciesOf = map[string][]corev1.RestartPolicy{
	"Deployment":   {corev1.RestartPolicyAlways},
	"ReplicaSet":   {corev1.RestartPolicyAlways},
	"DaemonSet":    {corev1.RestartPolicyAlways},
	"CloneSet":     {corev1.RestartPolicyAlways},
	"Job":          {corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever},
	"CronJob":      {corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever},
	"BroadcastJob": {corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever},
}

// Problems validates the pod o creates, injected (after; before is the pod its template
// describes, as written), as the API server would validate it: what it would refuse, each named
// at the field of o as written. A problem in a container or volume the injection added names it
// and its SidecarSet; injected are the SidecarSets that injected something.
func Problems(w *workspace.Workspace, o *manifest.Object, before, after *corev1.Pod, injected []string) manifest.Errors {
	spec := after.Spec.DeepCopy()
	for _, cs := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
		for i := range cs {
			defaults.Container(&cs[i])
			// Kubernetes defaults a startupProbe as it does the others; OpenKruise's sidecar
			// defaulting, which defaults.Container is, leaves it out.
			defaults.Probe(cs[i].StartupProbe)
		}
	}
	for i := range spec.Volumes {
		defaults.Volume(&spec.Volumes[i])
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	for _, name := range manifest.VolumeClaimTemplates(o.Obj) {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
	}
	errs := validation.PodSpec(spec, field.NewPath("spec"))
	kind := o.Report("", "").Kind
	if allowed, ok := restartPoliciesOf[kind]; ok && !slices.Contains(allowed, spec.RestartPolicy) {
		errs = append(errs, field.NotSupported(field.NewPath("spec", "restartPolicy"), spec.RestartPolicy, allowed))
	}
	var out manifest.Errors
	for _, e := range errs {
		path, note := writtenPodPath(w, e.Field, before, after, injected)
		path = TemplateField(o, path)
		if o.Dropped(path) {
			continue // a value that did not decode, already reported
		}
		out = append(out, o.Report(path, e.ErrorBody()+note))
	}
	return out
}

var podListItem = regexp.MustCompile(`^spec\.(containers|initContainers|volumes)\[(\d+)\]`)

// writtenPodPath turns a path into the injected pod into one into the pod as written: the
// injection inserts sidecars and volumes among those written, in order, so an item written keeps
// its order among them. An item the injection added keeps its place in the injected pod, and note
// names it and the SidecarSet it came from.
func writtenPodPath(w *workspace.Workspace, path string, before, after *corev1.Pod, injected []string) (string, string) {
	m := podListItem.FindStringSubmatch(path)
	if m == nil {
		return path, ""
	}
	i, _ := strconv.Atoi(m[2])
	var written, now []string
	what := "container"
	switch m[1] {
	case "containers":
		written, now = containerNames(before.Spec.Containers), containerNames(after.Spec.Containers)
	case "initContainers":
		written, now = containerNames(before.Spec.InitContainers), containerNames(after.Spec.InitContainers)
	default:
		what = "volume"
		for _, v := range before.Spec.Volumes {
			written = append(written, v.Name)
		}
		for _, v := range after.Spec.Volumes {
			now = append(now, v.Name)
		}
	}
	if i >= len(now) {
		return path, "" // a volume of a volumeClaimTemplate
	}
	j := 0
	for k := 0; k <= i; k++ {
		if j < len(written) && written[j] == now[k] {
			if k == i {
				return fmt.Sprintf("spec.%s[%d]%s", m[1], j, path[len(m[0]):]), ""
			}
			j++
		}
	}
	return path, fmt.Sprintf(" (%s %s, injected by %s)", what, now[i], injectedBy(w, m[1], now[i], injected))
}

// injectedBy names the SidecarSet among injected that brings the container or volume name.
func injectedBy(w *workspace.Workspace, list, name string, injected []string) string {
	for _, ss := range w.SidecarSets {
		if !slices.Contains(injected, ss.Name) {
			continue
		}
		switch list {
		case "containers":
			for _, c := range ss.Spec.Containers {
				if c.Name == name {
					return "SidecarSet/" + ss.Name
				}
			}
		case "initContainers":
			for _, c := range ss.Spec.InitContainers {
				if c.Name == name {
					return "SidecarSet/" + ss.Name
				}
			}
		default:
			for _, v := range ss.Spec.Volumes {
				if v.Name == name {
					return "SidecarSet/" + ss.Name
				}
			}
		}
	}
	return "the injection"
}

func containerNames(cs []corev1.Container) []string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return names
}
