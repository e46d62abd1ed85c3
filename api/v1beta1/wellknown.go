package v1beta1

// Names written on pods, SidecarSets and ControllerRevisions. They are OpenKruise's, verbatim: pods
// injected by OpenKruise and by sidecarops must be indistinguishable.
const (
	// SidecarSetHashAnnotation holds, on a SidecarSet, the hash of its containers and, on a pod, the
	// JSON map sidecarSetName -> SidecarSetUpgradeSpec.
	SidecarSetHashAnnotation = "kruise.io/sidecarset-hash"
	// SidecarSetHashWithoutImageAnnotation is SidecarSetHashAnnotation computed with every image blanked.
	SidecarSetHashWithoutImageAnnotation = "kruise.io/sidecarset-hash-without-image"
	// SidecarSetListAnnotation is the comma-joined sorted set of SidecarSets injected into a pod.
	SidecarSetListAnnotation = "kruise.io/sidecarset-injected-list"
	// SidecarSetInplaceUpdateStateAnnotation records in-place sidecar upgrades on a pod.
	SidecarSetInplaceUpdateStateAnnotation = "kruise.io/sidecarset-inplace-update-state"
	// SidecarSetWorkingHotUpgradeContainer maps a hot-upgrade sidecar to its working twin on a pod.
	SidecarSetWorkingHotUpgradeContainer = "kruise.io/sidecarset-working-hotupgrade-container"
	// SidecarSetVersionAnnotationPrefix + container name holds the version of a hot-upgrade twin.
	SidecarSetVersionAnnotationPrefix = "version.sidecarset.kruise.io/"
	// SidecarSetVersionAltAnnotationPrefix + container name holds the version of the other twin.
	SidecarSetVersionAltAnnotationPrefix = "versionalt.sidecarset.kruise.io/"

	// SidecarSetCustomVersionLabel is the v1alpha1 home of customVersion, copied to ControllerRevisions.
	SidecarSetCustomVersionLabel = "apps.kruise.io/sidecarset-custom-version"
	// SidecarSetNameLabel marks the ControllerRevisions of a SidecarSet.
	SidecarSetNameLabel = "kruise.io/sidecarset-name"
	// ControllerRevisionHashLabel is the label Kubernetes' history package puts on revisions.
	ControllerRevisionHashLabel = "controller.kubernetes.io/hash"

	// SidecarSetCanaryAnnotation ("true") marks a canary SidecarSet.
	SidecarSetCanaryAnnotation = "apps.kruise.io/sidecarset-canary"
	// SidecarSetBaseAnnotation names the base SidecarSet of a canary.
	SidecarSetBaseAnnotation = "apps.kruise.io/sidecarset-base"

	// SidecarEnvInjected marks every injected container; its value is "true".
	SidecarEnvInjected = "IS_INJECTED"
	// SidecarSetVersionEnv and SidecarSetVersionAltEnv expose hot-upgrade versions to twins.
	SidecarSetVersionEnv    = "SIDECARSET_VERSION"
	SidecarSetVersionAltEnv = "SIDECARSET_VERSION_ALT"

	// NamespaceNameLabel is the label Kubernetes sets on every Namespace to its own name.
	NamespaceNameLabel = "kubernetes.io/metadata.name"

	// KruiseConfigurationName and PatchPodMetadataWhiteListKey locate OpenKruise's whitelist ConfigMap.
	KruiseConfigurationName      = "kruise-configuration"
	PatchPodMetadataWhiteListKey = "SidecarSet_PatchPodMetadata_WhiteList"
)
