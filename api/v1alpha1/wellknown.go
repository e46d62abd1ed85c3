package v1alpha1

import "github.com/sidecarops/sidecarops/api/v1beta1"

// The well-known names are v1beta1's (the same in both versions).
const (
	// SidecarSetHashAnnotation is v1beta1.SidecarSetHashAnnotation.
	SidecarSetHashAnnotation = v1beta1.SidecarSetHashAnnotation
	// SidecarSetHashWithoutImageAnnotation is v1beta1.SidecarSetHashWithoutImageAnnotation.
	SidecarSetHashWithoutImageAnnotation = v1beta1.SidecarSetHashWithoutImageAnnotation
	// SidecarSetListAnnotation is v1beta1.SidecarSetListAnnotation.
	SidecarSetListAnnotation = v1beta1.SidecarSetListAnnotation
	// SidecarSetInplaceUpdateStateAnnotation is v1beta1.SidecarSetInplaceUpdateStateAnnotation.
	SidecarSetInplaceUpdateStateAnnotation = v1beta1.SidecarSetInplaceUpdateStateAnnotation
	// SidecarSetWorkingHotUpgradeContainer is v1beta1.SidecarSetWorkingHotUpgradeContainer.
	SidecarSetWorkingHotUpgradeContainer = v1beta1.SidecarSetWorkingHotUpgradeContainer
	// SidecarSetVersionAnnotationPrefix is v1beta1.SidecarSetVersionAnnotationPrefix.
	SidecarSetVersionAnnotationPrefix = v1beta1.SidecarSetVersionAnnotationPrefix
	// SidecarSetVersionAltAnnotationPrefix is v1beta1.SidecarSetVersionAltAnnotationPrefix.
	SidecarSetVersionAltAnnotationPrefix = v1beta1.SidecarSetVersionAltAnnotationPrefix
	// SidecarSetCustomVersionLabel is v1beta1.SidecarSetCustomVersionLabel.
	SidecarSetCustomVersionLabel = v1beta1.SidecarSetCustomVersionLabel
	// SidecarSetNameLabel is v1beta1.SidecarSetNameLabel.
	SidecarSetNameLabel = v1beta1.SidecarSetNameLabel
	// ControllerRevisionHashLabel is v1beta1.ControllerRevisionHashLabel.
	ControllerRevisionHashLabel = v1beta1.ControllerRevisionHashLabel
	// SidecarSetCanaryAnnotation is v1beta1.SidecarSetCanaryAnnotation.
	SidecarSetCanaryAnnotation = v1beta1.SidecarSetCanaryAnnotation
	// SidecarSetBaseAnnotation is v1beta1.SidecarSetBaseAnnotation.
	SidecarSetBaseAnnotation = v1beta1.SidecarSetBaseAnnotation
	// SidecarEnvInjected is v1beta1.SidecarEnvInjected.
	SidecarEnvInjected = v1beta1.SidecarEnvInjected
	// SidecarSetVersionEnv is v1beta1.SidecarSetVersionEnv.
	SidecarSetVersionEnv = v1beta1.SidecarSetVersionEnv
	// SidecarSetVersionAltEnv is v1beta1.SidecarSetVersionAltEnv.
	SidecarSetVersionAltEnv = v1beta1.SidecarSetVersionAltEnv
	// NamespaceNameLabel is v1beta1.NamespaceNameLabel.
	NamespaceNameLabel = v1beta1.NamespaceNameLabel
	// KruiseConfigurationName is v1beta1.KruiseConfigurationName.
	KruiseConfigurationName = v1beta1.KruiseConfigurationName
	// PatchPodMetadataWhiteListKey is v1beta1.PatchPodMetadataWhiteListKey.
	PatchPodMetadataWhiteListKey = v1beta1.PatchPodMetadataWhiteListKey
)
