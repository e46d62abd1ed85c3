# METADATA
# title: SidecarSet conflicts
# description: |-
#   Which existing SidecarSets a SidecarSet would collide with on some pod (compat §2 step 6, compat §2.1).
#
#   Input: {"sidecarset": <normalised SidecarSet>}, compared with every other SidecarSet in data.
#   Each violation is a field.Invalid: {"field", "value", "message", "other"}.
# scope: package
package sidecarops.conflict

import data.sidecarops.selector

_mine := input.sidecarset

# Other SidecarSets are found through data.sidecarops.state.owners (built by bundles: who has a
# container, init container, volume or non-Retain annotation key of a given name), never by reading
# all of them: validating one SidecarSet against 10,000 must stay cheap.
_owners := data.sidecarops.state.owners

_other(other_name) := data.sidecarops.state.sidecarsets[other_name]

# initContainers are compared with initContainers and containers with containers only: they land in
# different pod lists, so equal names across them do not collide (as OpenKruise).
violations contains violation if {
	some list in _container_lists
	some i, name in _mine[list]
	some other_name in _owners[list][name]
	_related(other_name, _other(other_name))
	violation := {
		"field": sprintf("spec.%s[%d].name", [list, i]),
		"value": name,
		"message": sprintf("container %s already exist in %s", [name, other_name]),
		"other": other_name,
	}
}

# Equal volumes are shared harmlessly; only a different definition under the same name collides.
# owners groups a volume name's owners by the digest of their definition, so the many SidecarSets
# that declare a common volume identically are skipped without being read.
violations contains violation if {
	some volume_name, digest in _mine.volumeHashes
	some other_digest, names in _owners.volumes[volume_name]
	other_digest != digest
	some other_name in names
	_related(other_name, _other(other_name))
	violation := {
		"field": _volume_field(volume_name),
		"value": volume_name,
		"message": sprintf("volume %s is in conflict with sidecarset %s", [volume_name, other_name]),
		"other": other_name,
	}
}

# Retain never changes an existing annotation, and two JSON merge patches compose, so only a key
# that one side Overwrites can be fought over.
violations contains violation if {
	some key, mine in _patched
	some other_name in _owners.annotations[key]
	other := _other(other_name)
	some theirs in other.patchPodMetadata
	theirs.patchPolicy != "Retain"
	theirs.annotations[key]
	some i, policy in mine
	"Overwrite" in {policy, theirs.patchPolicy}
	_related(other_name, other)
	violation := {
		"field": sprintf("spec.patchPodMetadata[%d].annotations[%s]", [i, key]),
		"value": key,
		"message": sprintf("annotation %s is in conflict with sidecarset %s", [key, other_name]),
		"other": other_name,
	}
}

_container_lists := {list | some list in ["initContainers", "containers"]; count(object.get(_mine, list, [])) > 0}

# _patched[key][i]: policy of this SidecarSet's non-Retain patch i that sets key.
_patched := {key: {i: patch.patchPolicy |
	some i, patch in _mine.patchPodMetadata
	patch.patchPolicy != "Retain"
	key in object.keys(patch.annotations)
} |
	some patch in object.get(_mine, "patchPodMetadata", [])
	patch.patchPolicy != "Retain"
	some key, _ in patch.annotations
}

# _related: both could inject into one pod. On UPDATE data holds the old version under the same name.
# A canary and its base never inject together (the canary displaces the base), in either direction
# (decision D3; OpenKruise only skips the base when validating the canary).
_related(other_name, other) if {
	other_name != _mine.name
	not _canary_pair(other_name, other)
	_namespaces_overlap(_mine.namespaceSelector, other.namespaceSelector)
	_pods_overlap(_mine.selector, other.selector)
}

_canary_pair(other_name, _) if {
	_mine.canary
	_mine.base == other_name
}

_canary_pair(_, other) if {
	other.canary
	other.base == _mine.name
}

# Namespace objects are not consulted, as in OpenKruise: only two explicit selectors can be disjoint.
_namespaces_overlap(a, _) if a == null

_namespaces_overlap(_, b) if b == null

_namespaces_overlap(a, b) if selector.overlap(a, b)

# An unset or empty pod selector injects nowhere (compat §1.3), so it shares no pod with anything.
_pods_overlap(a, b) if {
	not selector.is_empty(a)
	not selector.is_empty(b)
	selector.overlap(a, b)
}

# The normalised document keys volumes by name; volumeNames keeps their spec order for the path.
_volume_field(volume_name) := sprintf("spec.volumes[%d]", [i]) if {
	some i, name in _mine.volumeNames
	name == volume_name
} else := "spec.volumes"
