# METADATA
# title: Blast radius
# description: |-
#   A SidecarSet selecting every namespace (no namespaceSelector: those created later too), or
#   more existing pods than a limit, changes too much at once to be one author's call: it needs an
#   approval annotation naming the ticket that approved it. The annotation records the approval;
#   it does not prove it (whoever writes the SidecarSet writes it): pair it with review of the
#   manifests, or with the ownership policy.
#
#   The pods are the impact view's. Without one they are not counted, and only warned of.
#
#   data.sidecarsets.blast_radius: maxPods; annotation; ticketPattern, the regular expression a
#   ticket matches; exemptGroups.
# scope: package
package sidecarsets.blast_radius

deny contains {"rule": rule, "field": field, "msg": sprintf("%s: %s", [what, _approve])} if {
	not _exempt
	not _approved
	some [rule, field, what] in _reach
}

warn contains {"rule": "pods", "field": "spec.selector", "msg": msg} if {
	not _exempt
	not _approved
	input.sidecarSet
	not input.impact
	msg := sprintf("the pods it selects are not known (no impact view): over %d, it needs annotation %s", [data.sidecarsets.blast_radius.maxPods, _annotation])
}

_annotation := data.sidecarsets.blast_radius.annotation

_reach contains ["all-namespaces", "spec.namespaceSelector", "it selects every namespace, those created later too"] if {
	object.get(input.sidecarSet.spec, "namespaceSelector", null) == null
}

_reach contains ["pods", "spec.selector", sprintf("it selects %d existing pods, over the %d allowed without approval", [n, limit])] if {
	n := input.impact.pods
	limit := data.sidecarsets.blast_radius.maxPods
	n > limit
}

_approval := input.sidecarSet.metadata.annotations[_annotation]

_approved if regex.match(data.sidecarsets.blast_radius.ticketPattern, _approval)

_approve := sprintf("set annotation %s to the ticket that approved it (%s), or narrow it", [_annotation, _ticket]) if {
	not _approval
} else := sprintf("annotation %s=%q names no ticket (%s): set it to the one that approved it, or narrow the SidecarSet", [_annotation, _approval, _ticket])

_ticket := sprintf("matching %s", [data.sidecarsets.blast_radius.ticketPattern])

# Break glass: system:masters bypasses RBAC and may remove this webhook anyway; refusing it only
# gets in the way of bootstrapping and recovery.
_exempt if {
	some group in input.userInfo.groups
	group in data.sidecarsets.blast_radius.exemptGroups
}
