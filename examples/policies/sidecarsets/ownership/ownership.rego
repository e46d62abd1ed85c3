# METADATA
# title: Owned SidecarSets
# description: |-
#   A SidecarSet labelled sidecarops.io/owner=<owner> belongs to the group groupPrefix<owner>
#   (tenant:<owner>: a label value cannot hold the ":" of such group names). On UPDATE, only that
#   group's members may widen which pods or namespaces it reaches, and only they may change or
#   remove the label. The owner is the stored SidecarSet's: the request cannot name itself owner.
#
#   "Reaches more" is what is refused, approximated from the selectors alone: input.impact is the
#   new SidecarSet's, and the old one's namespaces and pods are not in the input to compare with.
#   A change of spec.selector or spec.namespaceSelector is allowed to others only when the new
#   selector keeps every requirement of the old one, matchLabels k: v read as k In (v): adding
#   requirements narrows it, and no namespaceSelector at all selects every namespace (spec.selector
#   is never empty: OpenKruise refuses it). Anything else, a narrower In included, is refused.
#   A SidecarSet without the label is anyone's to label (RBAC decides who writes it at all);
#   CREATE is not this policy's.
#
#   data.sidecarsets.ownership: label; groupPrefix; exemptGroups, who acts for every owner.
# scope: package
package sidecarsets.ownership

deny contains {"rule": "selector", "field": sprintf("spec.%s", [key]), "msg": msg} if {
	_outsider
	some key in ["selector", "namespaceSelector"]
	old := object.get(input.oldSidecarSet.spec, key, null)
	new := object.get(input.sidecarSet.spec, key, null)
	not _narrows(old, new)
	msg := sprintf(
		"only members of %s, which owns this SidecarSet (label %s=%s), may change spec.%s other than by adding requirements to it: keep every requirement of the stored one, or ask them",
		[_owner_group, _label, _owner, key],
	)
}

deny contains {"rule": "owner-label", "field": sprintf("metadata.labels[%s]", [_label]), "msg": msg} if {
	_outsider
	new := object.get(object.get(input.sidecarSet.metadata, "labels", {}), _label, null)
	new != _owner
	msg := sprintf(
		"only members of %s, which owns this SidecarSet, may %s: keep %s=%s, or ask them",
		[_owner_group, _change(new), _label, _owner],
	)
}

_label := data.sidecarsets.ownership.label

# The stored SidecarSet's owner: there is one to replace on UPDATE only.
_owner := input.oldSidecarSet.metadata.labels[_label]

_owner_group := concat("", [data.sidecarsets.ownership.groupPrefix, _owner])

_outsider if {
	group := _owner_group
	not group in input.userInfo.groups
	not _exempt
}

_change(null) := sprintf("remove label %s", [_label])

_change(new) := sprintf("change label %s to %q", [_label, new]) if new != null

# A label selector is the conjunction of its requirements; matchLabels k: v is the requirement
# k In (v). One keeping every requirement of another selects a subset of what it selects.
_narrows(old, new) if {
	wanted := _requirements(new)
	every requirement in _requirements(old) {
		requirement in wanted
	}
}

_requirements(null) := set()

_requirements(selector) := {r |
	some key, value in object.get(selector, "matchLabels", {})
	r := {"key": key, "operator": "In", "values": {value}}
} | {r |
	some e in object.get(selector, "matchExpressions", [])
	r := {"key": e.key, "operator": e.operator, "values": {v | some v in object.get(e, "values", [])}}
} if {
	selector != null
}

_exempt if {
	some group in input.userInfo.groups
	group in data.sidecarsets.ownership.exemptGroups
}
