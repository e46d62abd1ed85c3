package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Field order in every struct below follows OpenKruise's types: the hash annotations are sha256 of
// encoding/json output, which emits fields in declaration order.

// SidecarSetSpec defines the desired state of SidecarSet.
type SidecarSetSpec struct {
	// Selector is a label query over the pods to inject and manage.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

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

	// CustomVersion is copied to the label apps.kruise.io/sidecarset-custom-version of the
	// ControllerRevision recorded for this spec (v1alpha1 carries it as that label on the SidecarSet),
	// so it must be a label value.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	CustomVersion string `json:"customVersion,omitempty"`
}

// SidecarSetPatchPodMetadata is a set of pod annotations and how to apply them.
type SidecarSetPatchPodMetadata struct {
	Annotations map[string]string `json:"annotations,omitempty"`
	// PatchPolicy is Retain (default), Overwrite or MergePatchJson.
	PatchPolicy SidecarSetPatchPolicyType `json:"patchPolicy,omitempty"`
}

// SidecarSetPatchPolicyType says how a patchPodMetadata entry meets an existing annotation.
type SidecarSetPatchPolicyType string

const (
	// SidecarSetRetainPatchPolicy (the default) writes the annotation only when the pod lacks the key.
	SidecarSetRetainPatchPolicy SidecarSetPatchPolicyType = "Retain"
	// SidecarSetOverwritePatchPolicy always writes the annotation, replacing the pod's value.
	SidecarSetOverwritePatchPolicy SidecarSetPatchPolicyType = "Overwrite"
	// SidecarSetMergePatchJsonPatchPolicy applies the value as an RFC 7386 JSON merge patch to the
	// pod's non-empty value, and writes it as is otherwise (compat §1.18).
	SidecarSetMergePatchJsonPatchPolicy SidecarSetPatchPolicyType = "MergePatchJson" //nolint:revive // var-naming: OpenKruise's exported name, kept for drop-in compatibility
)

// SidecarContainer is a container to inject, with its injection and upgrade settings.
type SidecarContainer struct {
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	corev1.Container `json:",inline"`

	// PodInjectPolicy places the sidecar before or after the pod's own containers.
	PodInjectPolicy PodInjectPolicyType `json:"podInjectPolicy,omitempty"`

	// UpgradeStrategy is ColdUpgrade (default) or HotUpgrade.
	UpgradeStrategy SidecarContainerUpgradeStrategy `json:"upgradeStrategy,omitempty"`

	// ShareVolumePolicy copies the app containers' volumeMounts into the sidecar.
	ShareVolumePolicy ShareVolumePolicy `json:"shareVolumePolicy,omitempty"`

	// ShareVolumeDevicePolicy copies the app containers' volumeDevices into the sidecar. A pointer,
	// so that SidecarSets which do not set it keep their hash.
	ShareVolumeDevicePolicy *ShareVolumePolicy `json:"shareVolumeDevicePolicy,omitempty"`

	// TransferEnv copies env vars from an app container.
	TransferEnv []TransferEnvVar `json:"transferEnv,omitempty"`

	// ResourcesPolicy computes the sidecar's resources from the pod's containers at creation.
	ResourcesPolicy *ResourcesPolicy `json:"resourcesPolicy,omitempty"`
}

// ShareVolumePolicy switches volume (or device) sharing on or off.
type ShareVolumePolicy struct {
	Type ShareVolumePolicyType `json:"type,omitempty"`
}

// PodInjectPolicyType places an injected container relative to the pod's own.
type PodInjectPolicyType string

const (
	// BeforeAppContainerType places the sidecar in front of the pod's own containers (the default
	// for containers).
	BeforeAppContainerType PodInjectPolicyType = "BeforeAppContainer"
	// AfterAppContainerType places the sidecar behind the pod's own containers (the default for
	// initContainers).
	AfterAppContainerType PodInjectPolicyType = "AfterAppContainer"
)

// ShareVolumePolicyType is enabled or disabled.
type ShareVolumePolicyType string

const (
	// ShareVolumePolicyEnabled gives the sidecar the volumeMounts (or volumeDevices) of the pod's
	// own containers (compat §1.15).
	ShareVolumePolicyEnabled ShareVolumePolicyType = "enabled"
	// ShareVolumePolicyDisabled (the default) shares nothing.
	ShareVolumePolicyDisabled ShareVolumePolicyType = "disabled"
)

// TransferEnvVar copies env vars from a pod container into the sidecar.
type TransferEnvVar struct {
	SourceContainerName string `json:"sourceContainerName,omitempty"`
	// +optional
	SourceContainerNameFrom *SourceContainerNameSource `json:"sourceContainerNameFrom,omitempty"`
	EnvName                 string                     `json:"envName,omitempty"`
	// +optional
	EnvNames []string `json:"envNames,omitempty"`
}

// SourceContainerNameSource reads the source container name from pod metadata.
type SourceContainerNameSource struct {
	// FieldRef supports metadata.labels['<KEY>'] and metadata.annotations['<KEY>'].
	FieldRef *corev1.ObjectFieldSelector `json:"fieldRef,omitempty"`
}

// SidecarContainerUpgradeType is ColdUpgrade or HotUpgrade.
type SidecarContainerUpgradeType string

const (
	// SidecarContainerColdUpgrade (the default) upgrades the sidecar by replacing its image in place,
	// which restarts the container.
	SidecarContainerColdUpgrade SidecarContainerUpgradeType = "ColdUpgrade"
	// SidecarContainerHotUpgrade injects the sidecar twice, <name>-1 and <name>-2, one working and
	// one idle on hotUpgradeEmptyImage, and upgrades by switching between them (compat §1.20, §3.9).
	SidecarContainerHotUpgrade SidecarContainerUpgradeType = "HotUpgrade"
)

// SidecarContainerUpgradeStrategy says how a sidecar is upgraded in place.
type SidecarContainerUpgradeStrategy struct {
	UpgradeType SidecarContainerUpgradeType `json:"upgradeType,omitempty"`
	// HotUpgradeEmptyImage is the image of the idle twin of a HotUpgrade sidecar.
	HotUpgradeEmptyImage string `json:"hotUpgradeEmptyImage,omitempty"`
}

// TargetContainersModeType aggregates the target containers' resources.
// +kubebuilder:validation:Enum=sum;max
type TargetContainersModeType string

const (
	// TargetContainersModeSum adds up the target containers' resources.
	TargetContainersModeSum TargetContainersModeType = "sum"
	// TargetContainersModeMax takes the largest of the target containers' resources.
	TargetContainersModeMax TargetContainersModeType = "max"
)

// ResourcesPolicy derives a sidecar's resources from the pod's containers.
type ResourcesPolicy struct {
	// +kubebuilder:validation:Required
	TargetContainersMode TargetContainersModeType `json:"targetContainersMode"`
	// +kubebuilder:default=".*"
	// +optional
	TargetContainersNameRegex string `json:"targetContainersNameRegex,omitempty"`
	// +kubebuilder:validation:Required
	ResourcesExpr ResourcesExpr `json:"resourcesExpr"`
}

// ResourcesExpr holds the expressions for limits and requests.
type ResourcesExpr struct {
	Limits   *ResourceExprLimits   `json:"limits,omitempty"`
	Requests *ResourceExprRequests `json:"requests,omitempty"`
}

// ResourceExprLimits are expressions over the aggregated limits.
type ResourceExprLimits struct {
	CPU    string `json:"cpu,omitempty"`
	Memory string `json:"memory,omitempty"`
}

// ResourceExprRequests are expressions over the aggregated requests.
type ResourceExprRequests struct {
	CPU    string `json:"cpu,omitempty"`
	Memory string `json:"memory,omitempty"`
}

// SidecarSetInjectionStrategy controls injection into new pods.
type SidecarSetInjectionStrategy struct {
	// Paused stops injection into new pods; injected pods are still managed.
	Paused bool `json:"paused,omitempty"`
	// Revision injects a historical revision instead of the latest spec.
	Revision *SidecarSetInjectRevision `json:"revision,omitempty"`
}

// SidecarSetInjectRevision names the historical revision to inject.
type SidecarSetInjectRevision struct {
	// CustomVersion selects the newest revision labelled apps.kruise.io/sidecarset-custom-version=<v>.
	// +optional
	CustomVersion *string `json:"customVersion,omitempty"`
	// RevisionName is the name of a ControllerRevision; it wins over CustomVersion.
	// +optional
	RevisionName *string `json:"revisionName,omitempty"`
	// Policy is Always (default) or Partial.
	// +kubebuilder:validation:Enum=Always;Partial
	// +kubebuilder:default=Always
	Policy SidecarSetInjectRevisionPolicy `json:"policy,omitempty"`
}

// SidecarSetInjectRevisionPolicy is Always or Partial.
type SidecarSetInjectRevisionPolicy string

const (
	// AlwaysSidecarSetInjectRevisionPolicy (the default) injects the historical revision into every
	// new pod.
	AlwaysSidecarSetInjectRevisionPolicy SidecarSetInjectRevisionPolicy = "Always"
	// PartialSidecarSetInjectRevisionPolicy injects the historical revision into the new pods that
	// updateStrategy.selector excludes and, when partition is a percentage, into that share of the
	// others at random; the rest get the current spec (compat §1.5 step 4).
	PartialSidecarSetInjectRevisionPolicy SidecarSetInjectRevisionPolicy = "Partial"
)

// SidecarSetUpdateStrategy controls in-place upgrades of injected pods.
type SidecarSetUpdateStrategy struct {
	// Type is RollingUpdate (default) or NotUpdate.
	Type SidecarSetUpdateStrategyType `json:"type,omitempty"`
	// Paused stops upgrades.
	Paused bool `json:"paused,omitempty"`
	// Selector limits upgrades to matching pods.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Partition is the number or percentage of pods kept on the old revision.
	Partition *intstr.IntOrString `json:"partition,omitempty"`
	// MaxUnavailable is the number or percentage of pods that may be unavailable; default 1.
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// PriorityStrategy orders pods for upgrade.
	PriorityStrategy *UpdatePriorityStrategy `json:"priorityStrategy,omitempty"`
	// ScatterStrategy spreads upgrades across label values.
	ScatterStrategy UpdateScatterStrategy `json:"scatterStrategy,omitempty"`
}

// SidecarSetUpdateStrategyType is RollingUpdate or NotUpdate.
type SidecarSetUpdateStrategyType string

const (
	// NotUpdateSidecarSetStrategyType keeps the status and revisions up to date but never modifies
	// a pod.
	NotUpdateSidecarSetStrategyType SidecarSetUpdateStrategyType = "NotUpdate"
	// RollingUpdateSidecarSetStrategyType (the default) upgrades the injected pods in place, as
	// partition, maxUnavailable and the priority and scatter strategies allow.
	RollingUpdateSidecarSetStrategyType SidecarSetUpdateStrategyType = "RollingUpdate"
)

// UpdatePriorityStrategy orders pods by weights or by ordered label keys; not both.
type UpdatePriorityStrategy struct {
	WeightPriority []UpdatePriorityWeightTerm `json:"weightPriority,omitempty"`
	OrderPriority  []UpdatePriorityOrderTerm  `json:"orderPriority,omitempty"`
}

// UpdatePriorityWeightTerm adds Weight to pods matching MatchSelector.
type UpdatePriorityWeightTerm struct {
	Weight        int32                `json:"weight"`
	MatchSelector metav1.LabelSelector `json:"matchSelector"`
}

// UpdatePriorityOrderTerm orders pods by the integer value of a label.
type UpdatePriorityOrderTerm struct {
	OrderedKey string `json:"orderedKey"`
}

// UpdateScatterStrategy spreads pods with the given label values across the upgrade.
type UpdateScatterStrategy []UpdateScatterTerm

// UpdateScatterTerm is one label key and value (or "*" for every value).
type UpdateScatterTerm struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// SidecarSetStatus is the observed state of a SidecarSet.
type SidecarSetStatus struct {
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	MatchedPods        int32  `json:"matchedPods"`
	UpdatedPods        int32  `json:"updatedPods"`
	ReadyPods          int32  `json:"readyPods"`
	UpdatedReadyPods   int32  `json:"updatedReadyPods,omitempty"`
	LatestRevision     string `json:"latestRevision,omitempty"`
	CollisionCount     *int32 `json:"collisionCount,omitempty"`
	// Conditions is a sidecarops addition (OpenKruise has none here): ConditionConflict says
	// whether the SidecarSet collides with others that were admitted at the same moment.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ConditionConflict is True while the SidecarSet collides with another (a container name, a
// volume defined otherwise or an overwritten annotation on pods both may select): the validating
// webhook refuses that, but two SidecarSets admitted at the same moment are each checked without
// the other. On a pod both select only the older one is injected (decision D7).
const ConditionConflict = "Conflict"

// SidecarSet injects sidecar containers into the pods it selects and keeps them up to date.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
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
