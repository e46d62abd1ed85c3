# Shared fixtures for the policy tests: normalised SidecarSets as bundles.Normalize writes them
# (docs/design.md "Bundle contract").
package sidecarops.fixtures_test

_defaults := {
	"labels": {},
	"canary": false,
	"base": "",
	"selector": null,
	"namespaceSelector": null,
	"injectionPaused": false,
	"updateType": "RollingUpdate",
	"containers": [],
	"initContainers": [],
	"volumes": {},
	"volumeNames": [],
	"patchPodMetadata": [],
}

# volumeHashes are derived from the volumes, as bundles.Normalize derives them (any stable digest of
# the definition serves; bundles uses sha256 of the Go JSON encoding).
sidecarset(name, fields) := object.union(doc, {"volumeHashes": {n: crypto.sha256(json.marshal(v)) | some n, v in doc.volumes}}) if {
	doc := object.union(object.union(_defaults, {"name": name}), fields)
}

labels_selector(labels) := {"matchLabels": labels, "matchExpressions": []}

pod(labels) := {"metadata": {"name": "test-pod", "labels": labels}, "spec": {"containers": [{"name": "app"}]}}

# by_name turns a list of SidecarSets into data.sidecarops.state.sidecarsets.
by_name(sidecarsets) := {s.name: s | some s in sidecarsets}

# owners builds data.sidecarops.state.owners for a list of normalised SidecarSets, as bundles does.
owners(sidecarsets) := {
	"containers": _owners_of(sidecarsets, "containers"),
	"initContainers": _owners_of(sidecarsets, "initContainers"),
	"volumes": {name: {hash: [s.name | some s in sidecarsets; s.volumeHashes[name] == hash] |
		some s in sidecarsets
		hash := s.volumeHashes[name]
	} |
		some s in sidecarsets
		some name, _ in s.volumes
	},
	"annotations": {key: [s.name | some s in sidecarsets; _patches(s, key)] | some s in sidecarsets; some key in _patched_keys(s)},
}

_owners_of(sidecarsets, list) := {name: [s.name | some s in sidecarsets; name in s[list]] | some s in sidecarsets; some name in s[list]}

_patched_keys(s) := {key | some p in s.patchPodMetadata; p.patchPolicy != "Retain"; some key, _ in p.annotations}

_patches(s, key) if key in _patched_keys(s)

# collidable builds data.sidecarops.state.collidable from owners, as bundles does: the SidecarSets
# that share a container or init container name with another, or a volume name with another
# definition.
collidable(sidecarsets) := {name: true | some name in _shared_names(owners(sidecarsets))}

_shared_names(index) := {name |
	some list in ["containers", "initContainers"]
	some names in index[list]
	count(names) > 1
	some name in names
} | {name |
	some digests in index.volumes
	count(digests) > 1
	some names in digests
	some name in names
}

# canaries builds data.sidecarops.state.canaries (canary name → base name), as bundles does.
canaries(sidecarsets) := {s.name: s.base | some s in sidecarsets; s.canary; s.base != s.name}
