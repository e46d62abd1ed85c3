package defaults

import (
	"errors"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/sidecarset/hashes"
)

const (
	defaultRevisionHistoryLimit = int32(10)
	// defaultTargetContainersNameRegex is the CRD schema default (+kubebuilder:default) that the API
	// server applies before any webhook; offline input never went through an API server.
	defaultTargetContainersNameRegex = ".*"
)

// SidecarSet defaults ss in place as OpenKruise's defaulting webhook (plus the CRD schema defaults)
// would; it does not touch the hash annotations. ss may be nil.
func SidecarSet(ss *v1beta1.SidecarSet) {
	if ss == nil {
		return
	}
	spec := &ss.Spec
	updateStrategy(&spec.UpdateStrategy)
	for i := range spec.InitContainers {
		sidecarContainer(&spec.InitContainers[i], v1beta1.AfterAppContainerType)
	}
	for i := range spec.Containers {
		sidecarContainer(&spec.Containers[i], v1beta1.BeforeAppContainerType)
	}
	for i := range spec.Volumes {
		Volume(&spec.Volumes[i])
	}
	if spec.RevisionHistoryLimit == nil {
		limit := defaultRevisionHistoryLimit
		spec.RevisionHistoryLimit = &limit
	}
	for i := range spec.PatchPodMetadata {
		if spec.PatchPodMetadata[i].PatchPolicy == "" {
			spec.PatchPodMetadata[i].PatchPolicy = v1beta1.SidecarSetRetainPatchPolicy
		}
	}
	if r := spec.InjectionStrategy.Revision; r != nil && r.Policy == "" {
		r.Policy = v1beta1.AlwaysSidecarSetInjectRevisionPolicy
	}
}

// SidecarSetAndHash defaults ss and then (re)writes both hash annotations, in that order because
// the hashes cover the defaulted containers (compat §1.8).
func SidecarSetAndHash(ss *v1beta1.SidecarSet) error {
	if ss == nil {
		return errors.New("defaults: nil SidecarSet")
	}
	SidecarSet(ss)
	h, err := hashes.SidecarSetHash(ss)
	if err != nil {
		return err
	}
	withoutImage, err := hashes.SidecarSetHashWithoutImage(ss)
	if err != nil {
		return err
	}
	if ss.Annotations == nil {
		ss.Annotations = map[string]string{}
	}
	ss.Annotations[v1beta1.SidecarSetHashAnnotation] = h
	ss.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation] = withoutImage
	return nil
}

// updateStrategy defaults regardless of the strategy type, as OpenKruise does: NotUpdate
// SidecarSets get maxUnavailable and partition too.
func updateStrategy(s *v1beta1.SidecarSetUpdateStrategy) {
	if s.Type == "" {
		s.Type = v1beta1.RollingUpdateSidecarSetStrategyType
	}
	if s.MaxUnavailable == nil {
		one := intstr.FromInt32(1)
		s.MaxUnavailable = &one
	}
	if s.Partition == nil {
		zero := intstr.FromInt32(0)
		s.Partition = &zero
	}
}

func sidecarContainer(c *v1beta1.SidecarContainer, injectPolicy v1beta1.PodInjectPolicyType) {
	if c.PodInjectPolicy == "" {
		c.PodInjectPolicy = injectPolicy
	}
	if c.UpgradeStrategy.UpgradeType == "" {
		c.UpgradeStrategy.UpgradeType = v1beta1.SidecarContainerColdUpgrade
	}
	if c.ShareVolumePolicy.Type == "" {
		c.ShareVolumePolicy.Type = v1beta1.ShareVolumePolicyDisabled
	}
	// ShareVolumeDevicePolicy stays nil on purpose: it is a pointer so that SidecarSets which predate
	// it keep their hash.
	Container(&c.Container)
	for i := range c.TransferEnv {
		// OpenKruise dereferences FieldRef unconditionally (and panics on nil); a nil one is left for
		// validation to report.
		if from := c.TransferEnv[i].SourceContainerNameFrom; from != nil {
			objectFieldSelector(from.FieldRef)
		}
	}
	if p := c.ResourcesPolicy; p != nil && p.TargetContainersNameRegex == "" {
		p.TargetContainersNameRegex = defaultTargetContainersNameRegex
	}
}
