// Package migrate tests switching a cluster from a running OpenKruise on a real API server, both
// ways docs/migration.md describes: taking it over (path A, OpenKruise stopped) and coexisting
// with it (path B, OpenKruise kept for a CloneSet behind the openkruise-fence). The state OpenKruise
// leaves is built by hand (its CRD conversion and webhook registrations, its controller's
// Deployment, SidecarSets stored as v1beta1 with its hashes, ControllerRevisions with its names and
// labels in kruise-system, pods with the annotations it writes), the preflight is run as a user
// runs it, and then the manager takes over with kwok as the kubelet; OpenKruise's manager is
// impersonated where its writes matter. What the paths do to OpenKruise's Helm release is run with
// the pinned Helm on a chart built as OpenKruise's is.
package migrate
