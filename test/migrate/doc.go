// Package migrate tests taking a cluster over from a running OpenKruise on a real API server: the
// state OpenKruise leaves is built by hand (its CRD conversion and webhook registrations, its
// controller's Deployment, SidecarSets stored as v1beta1 with its hashes, ControllerRevisions with
// its names and labels in kruise-system, pods with the annotations it writes), the preflight is run
// as a user runs it, and then the manager takes over with kwok as the kubelet.
package migrate
