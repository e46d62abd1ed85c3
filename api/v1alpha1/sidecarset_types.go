package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// Field order in every struct below follows OpenKruise's types: the hash annotations are sha256 of
// encoding/json output, which emits fields in declaration order.

// SidecarSetSpec defines the desired state of SidecarSet.
type SidecarSetSpec struct {
	// Selector is a label query over the pods to inject and manage.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Namespace restricts the SidecarSet to pods in this namespace.
	Namespace string `json:"namespace,omitempty"`

	// NamespaceSelector restricts the SidecarSet to pods in namespaces whose labels match.
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// InitContainers are injected into new pods only, sorted by name.
	InitContainers []SidecarContainer `json:"initContainers,omitempty"`

	// Containers are injected into new pods and upgraded in place.
	Containers []SidecarContainer `json:"containers,omitempty"`

	// Volumes is the catalogue of volumes the sidecars may mount; only referenced ones are injected.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// UpdateStrategy controls in-place upgrades of injected pods.
	UpdateStrategy SidecarSetUpdateStrategy `json:"updateStrategy,omitempty"`

	// InjectionStrategy controls injection into new pods.
	InjectionStrategy SidecarSetInjectionStrategy `json:"injectionStrategy,omitempty"`

	// ImagePullSecrets are merged into new pods.
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// RevisionHistoryLimit is the number of ControllerRevisions kept; default 10.
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// PatchPodMetadata patches pod annotations at injection and upgrade.
	PatchPodMetadata []SidecarSetPatchPodMetadata `json:"patchPodMetadata,omitempty"`
}

// The types below are v1beta1's: the two versions differ only in the SidecarSetSpec fields above
// (namespace here, customVersion there), as in OpenKruise.

type (
	// SidecarSetPatchPodMetadata is v1beta1.SidecarSetPatchPodMetadata.
	SidecarSetPatchPodMetadata = v1beta1.SidecarSetPatchPodMetadata
	// SidecarSetPatchPolicyType is v1beta1.SidecarSetPatchPolicyType.
	SidecarSetPatchPolicyType = v1beta1.SidecarSetPatchPolicyType
	// SidecarContainer is v1beta1.SidecarContainer.
	SidecarContainer = v1beta1.SidecarContainer
	// ShareVolumePolicy is v1beta1.ShareVolumePolicy.
	ShareVolumePolicy = v1beta1.ShareVolumePolicy
	// PodInjectPolicyType is v1beta1.PodInjectPolicyType.
	PodInjectPolicyType = v1beta1.PodInjectPolicyType
	// ShareVolumePolicyType is v1beta1.ShareVolumePolicyType.
	ShareVolumePolicyType = v1beta1.ShareVolumePolicyType
	// TransferEnvVar is v1beta1.TransferEnvVar.
	TransferEnvVar = v1beta1.TransferEnvVar
	// SourceContainerNameSource is v1beta1.SourceContainerNameSource.
	SourceContainerNameSource = v1beta1.SourceContainerNameSource
	// SidecarContainerUpgradeType is v1beta1.SidecarContainerUpgradeType.
	SidecarContainerUpgradeType = v1beta1.SidecarContainerUpgradeType
	// SidecarContainerUpgradeStrategy is v1beta1.SidecarContainerUpgradeStrategy.
	SidecarContainerUpgradeStrategy = v1beta1.SidecarContainerUpgradeStrategy
	// TargetContainersModeType is v1beta1.TargetContainersModeType.
	TargetContainersModeType = v1beta1.TargetContainersModeType
	// ResourcesPolicy is v1beta1.ResourcesPolicy.
	ResourcesPolicy = v1beta1.ResourcesPolicy
	// ResourcesExpr is v1beta1.ResourcesExpr.
	ResourcesExpr = v1beta1.ResourcesExpr
	// ResourceExprLimits is v1beta1.ResourceExprLimits.
	ResourceExprLimits = v1beta1.ResourceExprLimits
	// ResourceExprRequests is v1beta1.ResourceExprRequests.
	ResourceExprRequests = v1beta1.ResourceExprRequests
	// SidecarSetInjectionStrategy is v1beta1.SidecarSetInjectionStrategy.
	SidecarSetInjectionStrategy = v1beta1.SidecarSetInjectionStrategy
	// SidecarSetInjectRevision is v1beta1.SidecarSetInjectRevision.
	SidecarSetInjectRevision = v1beta1.SidecarSetInjectRevision
	// SidecarSetInjectRevisionPolicy is v1beta1.SidecarSetInjectRevisionPolicy.
	SidecarSetInjectRevisionPolicy = v1beta1.SidecarSetInjectRevisionPolicy
	// SidecarSetUpdateStrategy is v1beta1.SidecarSetUpdateStrategy.
	SidecarSetUpdateStrategy = v1beta1.SidecarSetUpdateStrategy
	// SidecarSetUpdateStrategyType is v1beta1.SidecarSetUpdateStrategyType.
	SidecarSetUpdateStrategyType = v1beta1.SidecarSetUpdateStrategyType
	// UpdatePriorityStrategy is v1beta1.UpdatePriorityStrategy.
	UpdatePriorityStrategy = v1beta1.UpdatePriorityStrategy
	// UpdatePriorityWeightTerm is v1beta1.UpdatePriorityWeightTerm.
	UpdatePriorityWeightTerm = v1beta1.UpdatePriorityWeightTerm
	// UpdatePriorityOrderTerm is v1beta1.UpdatePriorityOrderTerm.
	UpdatePriorityOrderTerm = v1beta1.UpdatePriorityOrderTerm
	// UpdateScatterStrategy is v1beta1.UpdateScatterStrategy.
	UpdateScatterStrategy = v1beta1.UpdateScatterStrategy
	// UpdateScatterTerm is v1beta1.UpdateScatterTerm.
	UpdateScatterTerm = v1beta1.UpdateScatterTerm
	// SidecarSetStatus is v1beta1.SidecarSetStatus.
	SidecarSetStatus = v1beta1.SidecarSetStatus
)

// Constants of the shared types.
const (
	// SidecarSetRetainPatchPolicy is v1beta1.SidecarSetRetainPatchPolicy.
	SidecarSetRetainPatchPolicy = v1beta1.SidecarSetRetainPatchPolicy
	// SidecarSetOverwritePatchPolicy is v1beta1.SidecarSetOverwritePatchPolicy.
	SidecarSetOverwritePatchPolicy = v1beta1.SidecarSetOverwritePatchPolicy
	// SidecarSetMergePatchJsonPatchPolicy is v1beta1.SidecarSetMergePatchJsonPatchPolicy.
	SidecarSetMergePatchJsonPatchPolicy = v1beta1.SidecarSetMergePatchJsonPatchPolicy //nolint:revive // var-naming: OpenKruise's exported name, kept for drop-in compatibility
	// BeforeAppContainerType is v1beta1.BeforeAppContainerType.
	BeforeAppContainerType = v1beta1.BeforeAppContainerType
	// AfterAppContainerType is v1beta1.AfterAppContainerType.
	AfterAppContainerType = v1beta1.AfterAppContainerType
	// ShareVolumePolicyEnabled is v1beta1.ShareVolumePolicyEnabled.
	ShareVolumePolicyEnabled = v1beta1.ShareVolumePolicyEnabled
	// ShareVolumePolicyDisabled is v1beta1.ShareVolumePolicyDisabled.
	ShareVolumePolicyDisabled = v1beta1.ShareVolumePolicyDisabled
	// SidecarContainerColdUpgrade is v1beta1.SidecarContainerColdUpgrade.
	SidecarContainerColdUpgrade = v1beta1.SidecarContainerColdUpgrade
	// SidecarContainerHotUpgrade is v1beta1.SidecarContainerHotUpgrade.
	SidecarContainerHotUpgrade = v1beta1.SidecarContainerHotUpgrade
	// TargetContainersModeSum is v1beta1.TargetContainersModeSum.
	TargetContainersModeSum = v1beta1.TargetContainersModeSum
	// TargetContainersModeMax is v1beta1.TargetContainersModeMax.
	TargetContainersModeMax = v1beta1.TargetContainersModeMax
	// AlwaysSidecarSetInjectRevisionPolicy is v1beta1.AlwaysSidecarSetInjectRevisionPolicy.
	AlwaysSidecarSetInjectRevisionPolicy = v1beta1.AlwaysSidecarSetInjectRevisionPolicy
	// PartialSidecarSetInjectRevisionPolicy is v1beta1.PartialSidecarSetInjectRevisionPolicy.
	PartialSidecarSetInjectRevisionPolicy = v1beta1.PartialSidecarSetInjectRevisionPolicy
	// NotUpdateSidecarSetStrategyType is v1beta1.NotUpdateSidecarSetStrategyType.
	NotUpdateSidecarSetStrategyType = v1beta1.NotUpdateSidecarSetStrategyType
	// RollingUpdateSidecarSetStrategyType is v1beta1.RollingUpdateSidecarSetStrategyType.
	RollingUpdateSidecarSetStrategyType = v1beta1.RollingUpdateSidecarSetStrategyType
	// ConditionConflict is v1beta1.ConditionConflict.
	ConditionConflict = v1beta1.ConditionConflict
)

// SidecarSet injects sidecar containers into the pods it selects and keeps them up to date.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="MATCHED",type="integer",JSONPath=".status.matchedPods",description="The number of pods matched."
// +kubebuilder:printcolumn:name="UPDATED",type="integer",JSONPath=".status.updatedPods",description="The number of pods matched and updated."
// +kubebuilder:printcolumn:name="READY",type="integer",JSONPath=".status.readyPods",description="The number of pods matched and ready."
// +kubebuilder:printcolumn:name="UPDATED-READY",type="integer",JSONPath=".status.updatedReadyPods",description="The number of pods updated and ready."
// +kubebuilder:printcolumn:name="PAUSED",type="boolean",JSONPath=".spec.updateStrategy.paused",priority=1,description="Whether the rollout is paused."
// +kubebuilder:printcolumn:name="PARTITION",type="string",JSONPath=".spec.updateStrategy.partition",priority=1,description="Pods kept on the old version."
// +kubebuilder:printcolumn:name="MAX-UNAVAILABLE",type="string",JSONPath=".spec.updateStrategy.maxUnavailable",priority=1,description="Upgraded pods allowed to be unavailable at once."
// +kubebuilder:printcolumn:name="REVISION",type="string",JSONPath=".status.latestRevision",priority=1,description="The latest ControllerRevision."
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type SidecarSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SidecarSetSpec   `json:"spec,omitempty"`
	Status SidecarSetStatus `json:"status,omitempty"`
}

// SidecarSetList is a list of SidecarSets.
//
// +kubebuilder:object:root=true
type SidecarSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SidecarSet `json:"items"`
}
