package mutation

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// Prepared is what injecting a SidecarSet derives from the SidecarSet alone (Prepare): the sidecars
// that read nothing of the pod, built, and the catalogue volumes each sidecar refers to. A caller
// that injects many pods with the same SidecarSets, unchanged, prepares them once and passes them in
// Input.Prepared, so that every pod shares them instead of building them again. A sidecar that reads
// the pod (resourcesPolicy, shared volumes or devices, transferred env) or becomes hot-upgrade twins
// is still built per pod.
type Prepared struct {
	set       *v1beta1.SidecarSet // what it was prepared from
	catalogue catalogue
	// inits and containers hold, per spec index, the sidecar as injected, or nil when it is built
	// per pod; volumes, per spec index, the catalogue volumes its own mounts and devices refer to.
	inits, containers             []*corev1.Container
	initVolumes, containerVolumes [][]*corev1.Volume
	// sidecarList is what the hash entries list: the containers and native init containers, sorted,
	// without repeats.
	sidecarList []string
}

// Prepare derives ss's Prepared. It serves as long as ss is not modified; the result shares memory
// with ss and is read-only.
func Prepare(ss *v1beta1.SidecarSet) *Prepared {
	p := &Prepared{set: ss, catalogue: newCatalogue(ss)}
	p.inits, p.initVolumes = p.sidecars(ss, ss.Spec.InitContainers)
	p.containers, p.containerVolumes = p.sidecars(ss, ss.Spec.Containers)
	for i := range ss.Spec.InitContainers {
		if isNativeSidecar(&ss.Spec.InitContainers[i].Container) {
			p.sidecarList = append(p.sidecarList, ss.Spec.InitContainers[i].Name)
		}
	}
	for i := range ss.Spec.Containers {
		p.sidecarList = append(p.sidecarList, ss.Spec.Containers[i].Name)
	}
	slices.Sort(p.sidecarList)
	p.sidecarList = slices.Compact(p.sidecarList)
	if p.sidecarList == nil {
		// Never nil: OpenKruise writes "sidecarList":[] for a SidecarSet of plain init containers.
		p.sidecarList = []string{}
	}
	return p
}

// sidecars prepares one list of ss's sidecars: each that reads nothing of the pod built as build
// builds it, and the catalogue volumes each refers to.
func (p *Prepared) sidecars(ss *v1beta1.SidecarSet, list []v1beta1.SidecarContainer) ([]*corev1.Container, [][]*corev1.Volume) {
	built := make([]*corev1.Container, len(list))
	volumes := make([][]*corev1.Volume, len(list))
	// A builder without a pod: what readsPod lets through never reads one.
	var none builder
	for i := range list {
		sc := &list[i]
		volumes[i] = p.catalogue.appendReferenced(nil, sc)
		if readsPod(sc) || isHotUpgrade(sc) {
			continue
		}
		own := ownCopy(sc)
		if err := none.build(ss, "", i, &own); err != nil {
			continue // not reached without a resourcesPolicy; built per pod, it reports the error
		}
		built[i] = &own.Container
	}
	return built, volumes
}

// readsPod reports whether building sc reads the pod: its resources computed from the app
// containers', or volumes, devices or env taken from them.
func readsPod(sc *v1beta1.SidecarContainer) bool {
	return sc.ResourcesPolicy != nil || sc.ShareVolumePolicy.Type == v1beta1.ShareVolumePolicyEnabled ||
		(sc.ShareVolumeDevicePolicy != nil && sc.ShareVolumeDevicePolicy.Type == v1beta1.ShareVolumePolicyEnabled) ||
		len(sc.TransferEnv) > 0
}
