# Shared fixtures for the policy tests: normalised SidecarSets as bundles.Normalize writes them
# (docs/design.md "Bundle contract").
package sidecarops.fixtures_test

_defaults := {
	"labels": {},
	"canary": false,
	"base": "",
	"selector": null,
	"namespace": "",
	"namespaceSelector": null,
	"injectionPaused": false,
	"updateType": "RollingUpdate",
	"containers": [],
	"initContainers": [],
	"volumes": {},
	"volumeNames": [],
	"patchPodMetadata": [],
}

sidecarset(name, fields) := object.union(object.union(_defaults, {"name": name}), fields)

labels_selector(labels) := {"matchLabels": labels, "matchExpressions": []}

pod(labels) := {"metadata": {"name": "test-pod", "labels": labels}, "spec": {"containers": [{"name": "app"}]}}

# by_name turns a list of SidecarSets into data.sidecarops.state.sidecarsets.
by_name(sidecarsets) := {s.name: s | some s in sidecarsets}
