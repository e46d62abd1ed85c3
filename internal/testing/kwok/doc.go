// Package kwok runs the kwok controller (sigs.k8s.io/kwok, built by hack/kwok-bin.sh) against a
// local control plane, so Pods bound to a fake Node behave as if a kubelet ran them: envtest has
// no kubelet, and the in-place sidecar upgrade has to be proven against a status that follows the
// spec the way a kubelet's does.
//
// kwok only does what its Stages say; this package ships its own, embedded from stages/ and
// written to a temporary directory passed with --config (so nothing from ~/.kwok is picked up):
//
//   - node-initialize (kwok's own, unchanged): a managed Node becomes Ready, with addresses,
//     capacity and nodeInfo.
//   - pod-ready (kwok's fast pod-ready, extended): a Pending Pod on a managed Node becomes Running
//     with Initialized/Ready/ContainersReady conditions, pod and host IPs, and a ready, started,
//     running status per container carrying image, imageID and containerID. kwok's own stage
//     sets no imageID, which is exactly what an in-place upgrade is judged by.
//   - pod-image-change: a Running Pod whose spec.containers[i].image differs from that
//     container's status image (a jq selector over spec and status) gets, for those containers
//     only, the new image and imageID, a new containerID, restartCount+1, state running since now
//     and lastState terminated — what a kubelet reports after restarting a container for an image
//     change. Conditions are left as they are, so the Pod stays Ready throughout.
//   - pod-delete (kwok's own): a Pod with a deletionTimestamp is deleted, as the kubelet would
//     confirm; without it deleted Pods would stay Terminating.
//
// The stages' selectors are disjoint (Pending / Running with a changed image / being deleted), so
// at most one matches a Pod at a time.
//
// imageID is "docker-pullable://<image without tag or digest>@sha256:<sha256 of the full image
// reference>" (see ImageID). It is not a registry digest — nothing is pulled — but it is
// deterministic and differs whenever the reference differs, which is what the tests and an
// in-place update controller compare.
//
// Not covered: image changes of init containers (native sidecars), readiness probes, a container
// being briefly not ready during its restart, and scheduling — there is no kube-scheduler, so
// Pods must set spec.nodeName to the fake Node.
package kwok
