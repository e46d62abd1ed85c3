// Package defaults fills in a SidecarSet the way OpenKruise's defaulting webhook does (compat §1.8),
// including the Kubernetes container and volume defaults that the webhook applies by hand.
//
// Why it matters: the kruise.io/sidecarset-hash annotations are sha256 of the JSON of the defaulted
// containers (package hash), and ControllerRevision names are a hash of the defaulted spec, so any
// default applied differently from OpenKruise — even a harmless one — makes pods injected by
// OpenKruise look outdated to sidecarops and the other way round. The package therefore reproduces
// exactly what OpenKruise's SetDefaultsSidecarSet applies, no more:
//
//   - Container: Kubernetes SetDefaults_Container (imagePullPolicy from the image tag,
//     terminationMessagePath/Policy), ports protocol TCP, env valueFrom.fieldRef apiVersion v1,
//     resource quantities rounded up to milli precision (SetDefaults_ResourceList), liveness and
//     readiness probe numbers and their httpGet path/scheme, lifecycle postStart/preStop httpGet.
//     Deliberately NOT: startupProbe defaults and requests-from-limits. OpenKruise does not apply
//     them to SidecarSets (requests-from-limits is Kubernetes' SetDefaults_Pod, which only runs for
//     Pod objects; startupProbe is missing from OpenKruise's hand-written list), and applying them
//     would change the hash. The API server still applies both to the pod the sidecar lands in.
//     A consequence OpenKruise shares: validation refuses a startupProbe without successThreshold 1,
//     or with an httpGet lacking path or scheme, since nothing fills them.
//   - Volume: Kubernetes SetDefaults_Volume (a volume with no source becomes emptyDir; image volume
//     pullPolicy from the tag) and the source defaults OpenKruise's SetDefaultPodVolumes applies:
//     hostPath type "", secret/configMap/downwardAPI/projected defaultMode 0644 (420), downwardAPI
//     and projected downwardAPI fieldRef apiVersion v1, projected serviceAccountToken
//     expirationSeconds 3600. Not the ISCSI/RBD/AzureDisk/ScaleIO/ephemeral defaults: OpenKruise
//     does not apply them and volumes are part of ControllerRevision data.
//   - SidecarSet: updateStrategy (RollingUpdate, maxUnavailable 1, partition 0), per-container
//     podInjectPolicy (BeforeAppContainer for containers, AfterAppContainer for initContainers),
//     upgradeType ColdUpgrade, shareVolumePolicy disabled, transferEnv fieldRef apiVersion v1,
//     revisionHistoryLimit 10, patchPolicy Retain, injection revision policy Always, and the
//     CRD-schema default resourcesPolicy.targetContainersNameRegex ".*".
//
// Defaulting never fails and never removes or overrides a value that is set; applying it twice
// gives the same object as applying it once. This package decides nothing (validation does) and
// does not hash (SidecarSetAndHash delegates to package hash).
package defaults
