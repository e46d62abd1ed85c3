package vectors

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// DNSF is the container dns-f/dns:1.0 of compat §1.9, compat §1.10 and compat §4.3 M1 after OpenKruise's defaulting,
// spelled out by hand so that tests of hashes and revisions do not depend on package defaults.
func DNSF() v1beta1.SidecarContainer {
	return v1beta1.SidecarContainer{
		Container: corev1.Container{
			Name:                     "dns-f",
			Image:                    "dns:1.0",
			TerminationMessagePath:   "/dev/termination-log",
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy:          corev1.PullIfNotPresent,
		},
		PodInjectPolicy:   v1beta1.BeforeAppContainerType,
		UpgradeStrategy:   v1beta1.SidecarContainerUpgradeStrategy{UpgradeType: v1beta1.SidecarContainerColdUpgrade},
		ShareVolumePolicy: v1beta1.ShareVolumePolicy{Type: v1beta1.ShareVolumePolicyDisabled},
	}
}
