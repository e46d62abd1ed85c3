package podcheck

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/findings"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/workspace"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

// ShadowedVolumes are the strict findings about the volumes of the pod o creates (written: before
// injection) that have the name of a volume a sidecar of an injected SidecarSet mounts, but another
// definition. The pod's volume wins at injection (decision Q4), so the sidecar silently mounts the
// workload's volume instead of its own. A volume defined alike on both sides is shared on purpose.
// The findings have no severity yet: that is --strict's.
func ShadowedVolumes(w *workspace.Workspace, o *manifest.Object, written *corev1.Pod, injected []string) []findings.Finding {
	var out []findings.Finding
	for _, ss := range w.SidecarSets {
		if !slices.Contains(injected, ss.Name) {
			continue
		}
		// Last of a name wins, as in the catalogue the injection reads.
		catalogue := map[string]corev1.Volume{}
		for _, v := range ss.Spec.Volumes {
			catalogue[v.Name] = v
		}
		for i, v := range written.Spec.Volumes {
			own, ok := catalogue[v.Name]
			if !ok {
				continue
			}
			sidecar := mountedBy(ss, v.Name)
			if sidecar == "" {
				continue // the injection adds only the volumes a sidecar refers to
			}
			defaults.Volume(&v)
			defaults.Volume(&own)
			if apiequality.Semantic.DeepEqual(v.VolumeSource, own.VolumeSource) {
				continue
			}
			e := o.Report(TemplateField(o, fmt.Sprintf("spec.volumes[%d]", i)), fmt.Sprintf(
				"volume %q shadows the volume of the same name of SidecarSet/%s, which its container %s mounts: the pod's volume wins at injection, so the sidecar mounts this one instead of its own (rename one of them, or define them alike)",
				v.Name, ss.Name, sidecar))
			out = append(out, findings.Finding{Error: e, Rule: findings.RuleShadowedVolume, Also: w.Origin[ss]})
		}
	}
	return out
}

// mountedBy names the first container or init container of ss that mounts, or uses as a device,
// the volume name; "" when none does.
func mountedBy(ss *v1beta1.SidecarSet, name string) string {
	for _, c := range slices.Concat(ss.Spec.InitContainers, ss.Spec.Containers) {
		if slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == name }) ||
			slices.ContainsFunc(c.VolumeDevices, func(d corev1.VolumeDevice) bool { return d.Name == name }) {
			return c.Name
		}
	}
	return ""
}

// TemplateField is the path, in o as written, of field of the pod o creates: under its pod
// template (a Pod's own fields are the pod's).
func TemplateField(o *manifest.Object, field string) string {
	if pointer, _ := manifest.PodTemplatePointer(o.Obj); pointer != "" {
		return strings.ReplaceAll(strings.TrimPrefix(pointer, "/"), "/", ".") + "." + field
	}
	return field
}
