package rollout

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// SidecarList is the sidecarList an upgrade records for ss (compat §1.11): sorted names of its
// containers and native init sidecars, a HotUpgrade sidecar under its SidecarSet name.
func SidecarList(ss *v1beta1.SidecarSet) []string {
	if ss == nil {
		return []string{}
	}
	names := []string{}
	for i := range ss.Spec.InitContainers {
		if p := ss.Spec.InitContainers[i].RestartPolicy; p != nil && *p == corev1.ContainerRestartPolicyAlways {
			names = append(names, ss.Spec.InitContainers[i].Name)
		}
	}
	for i := range ss.Spec.Containers {
		names = append(names, ss.Spec.Containers[i].Name)
	}
	slices.Sort(names)
	return names
}

// HashAnnotationsAfterUpgrade returns the annotation values an in-place upgrade of pod to ss
// writes (S10, compat §3.6 step 2): kruise.io/sidecarset-hash with ss's entry replaced (new hash,
// sidecarList, controllerRevision = ss.status.latestRevision, now) and, when the pod still
// carried the legacy flat form, kruise.io/sidecarset-hash-without-image converted to the
// structured form (its values unchanged). The pod is not modified; the caller patches the
// returned keys. Converted legacy entries get their own SidecarSet name (OpenKruise writes the
// upgrading SidecarSet's name into every converted entry, which is a bug).
func HashAnnotationsAfterUpgrade(pod *corev1.Pod, ss *v1beta1.SidecarSet, now time.Time) map[string]string {
	out := map[string]string{}
	ann := podAnnotations(pod)
	specs := maps.Clone(UpgradeSpecs(ann, v1beta1.SidecarSetHashAnnotation))
	if isLegacy(ann[v1beta1.SidecarSetHashAnnotation]) {
		for k, v := range specs {
			v.UpdateTimestamp = metav1.NewTime(now)
			specs[k] = v
		}
		if raw := ann[v1beta1.SidecarSetHashWithoutImageAnnotation]; isLegacy(raw) {
			wi := maps.Clone(UpgradeSpecs(ann, v1beta1.SidecarSetHashWithoutImageAnnotation))
			for k, v := range wi {
				v.UpdateTimestamp = metav1.NewTime(now)
				wi[k] = v
			}
			out[v1beta1.SidecarSetHashWithoutImageAnnotation] = mustJSON(wi)
		}
	}
	name := ssName(ss)
	entry := UpgradeSpec{
		UpdateTimestamp: metav1.NewTime(now),
		Hash:            ssAnnotation(ss, v1beta1.SidecarSetHashAnnotation),
		SidecarSetName:  name,
		SidecarList:     SidecarList(ss),
	}
	if ss != nil {
		entry.ControllerRevision = ss.Status.LatestRevision
	}
	specs[name] = entry
	out[v1beta1.SidecarSetHashAnnotation] = mustJSON(specs)
	return out
}

// isLegacy: the value parses as the flat map of hashes and not as the structured form.
func isLegacy(raw string) bool {
	if raw == "" {
		return false
	}
	var structured map[string]UpgradeSpec
	if json.Unmarshal([]byte(raw), &structured) == nil {
		return false
	}
	var flat map[string]string
	return json.Unmarshal([]byte(raw), &flat) == nil
}

func mustJSON(v any) string {
	// Only maps of strings and UpgradeSpec are encoded here, which cannot fail.
	b, _ := json.Marshal(v)
	return string(b)
}

// IsHotUpgrading reports whether a HotUpgrade sidecar of ss in pod is between its upgrade and its
// reset (compat §3.9): the non-working twin does not run the empty image.
func IsHotUpgrading(pod *corev1.Pod, ss *v1beta1.SidecarSet) bool {
	if pod == nil || ss == nil {
		return false
	}
	for i := range ss.Spec.Containers {
		c := &ss.Spec.Containers[i]
		if !isHot(c) {
			continue
		}
		_, other := HotUpgradeContainers(c.Name, pod)
		for j := range pod.Spec.Containers {
			if pod.Spec.Containers[j].Name == other && pod.Spec.Containers[j].Image != c.UpgradeStrategy.HotUpgradeEmptyImage {
				return true
			}
		}
	}
	return false
}
