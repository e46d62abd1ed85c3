# METADATA
# title: Privileged sidecars
# description: |-
#   What a SidecarSet can carry that reaches the node from inside every pod it joins: a privileged
#   container, allowPrivilegeEscalation true, an added capability of a configured list, a hostPath
#   volume, a host port. The pod-level host namespaces (hostNetwork, hostPID, hostIPC) are no
#   SidecarSet field. Each is denied unless every namespace the SidecarSet selects carries the
#   opt-in label, which needs a namespaceSelector (selecting every namespace, it never applies)
#   and the impact view (without one the namespaces are not known, and it does not apply).
#
#   data.sidecarsets.privilege: optInLabel {key, value}; capabilities, those denied (with or
#   without CAP_); exemptGroups, requesters it does not hold.
# scope: package
package sidecarsets.privilege

deny contains {"rule": rule, "field": field, "msg": msg} if {
	not _exempt
	some [rule, field, what] in _risks
	reason := _not_opted_in
	msg := sprintf(
		"%s: allowed only where every namespace it selects is labelled %s, and %s; remove it, or set spec.namespaceSelector to namespaces so labelled",
		[what, _opt_in, reason],
	)
}

# The exception applies to the namespaces that exist: one created later that the namespaceSelector
# selects gets the sidecar too, labelled or not, unless the selector itself requires the label.
warn contains {"rule": "future-namespaces", "field": "spec.namespaceSelector", "msg": msg} if {
	not _exempt
	count(_risks) > 0
	not _not_opted_in
	not _requires_opt_in(input.sidecarSet.spec.namespaceSelector)
	msg := sprintf(
		"a namespace created later that spec.namespaceSelector selects gets its privileged sidecars without being labelled %s: require the label in spec.namespaceSelector.matchLabels",
		[_opt_in],
	)
}

_label := data.sidecarsets.privilege.optInLabel

_opt_in := sprintf("%s=%s", [_label.key, _label.value])

# [rule, field, what] of each setting that reaches the node.
_risks contains ["privileged", sprintf("%s.securityContext.privileged", [path]), sprintf("sidecar %s runs privileged", [c.name])] if {
	some path, c in _sidecars
	c.securityContext.privileged == true
}

# Only an explicit true: left out, the runtime's default applies, which Pod Security's restricted
# level (input.impact...podSecurity) reports where it is enforced.
_risks contains [
	"privilege-escalation",
	sprintf("%s.securityContext.allowPrivilegeEscalation", [path]),
	sprintf("sidecar %s allows privilege escalation", [c.name]),
] if {
	some path, c in _sidecars
	c.securityContext.allowPrivilegeEscalation == true
}

_risks contains [
	"capabilities",
	sprintf("%s.securityContext.capabilities.add[%d]", [path, i]),
	sprintf("sidecar %s adds capability %s", [c.name, capability]),
] if {
	some path, c in _sidecars
	some i, capability in c.securityContext.capabilities.add
	_capability(capability) in {_capability(denied) | some denied in data.sidecarsets.privilege.capabilities}
}

_risks contains [
	"host-path",
	sprintf("spec.volumes[%d].hostPath", [i]),
	sprintf("volume %s mounts the node's %s", [v.name, path]),
] if {
	some i, v in input.sidecarSet.spec.volumes
	path := v.hostPath.path
}

_risks contains [
	"host-port",
	sprintf("%s.ports[%d].hostPort", [path, i]),
	sprintf("sidecar %s binds the node's port %d", [c.name, port.hostPort]),
] if {
	some path, c in _sidecars
	some i, port in c.ports
	port.hostPort > 0
}

_sidecars[sprintf("spec.%s[%d]", [kind, i])] := c if {
	some kind in ["containers", "initContainers"]
	some i, c in input.sidecarSet.spec[kind]
}

# Runtimes take a capability with or without CAP_, in any case.
_capability(name) := trim_prefix(upper(name), "CAP_")

# Why the exception does not apply; undefined when it does.
_not_opted_in := "it selects every namespace, those created later too" if {
	object.get(input.sidecarSet.spec, "namespaceSelector", null) == null
} else := "the namespaces it selects are not known (no impact view)" if {
	not input.impact
} else := sprintf("it selects %s, which %s not", [concat(", ", _unlabelled), _are(_unlabelled)]) if {
	count(_unlabelled) > 0
}

_unlabelled := sort([name |
	some name, ns in input.impact.namespaces
	object.get(ns.labels, _label.key, "") != _label.value
])

_are(names) := "is" if count(names) == 1

else := "are"

_requires_opt_in(selector) if selector.matchLabels[_label.key] == _label.value

_requires_opt_in(selector) if {
	some e in selector.matchExpressions
	e.key == _label.key
	e.operator == "In"
	every value in e.values {
		value == _label.value
	}
}

# Break glass: system:masters bypasses RBAC and may remove this webhook anyway; refusing it only
# gets in the way of bootstrapping and recovery.
_exempt if {
	some group in input.userInfo.groups
	group in data.sidecarsets.privilege.exemptGroups
}
