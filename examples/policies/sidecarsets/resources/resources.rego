# METADATA
# title: Sidecar resources
# description: |-
#   Every sidecar (containers and initContainers) bounds what it takes from the pods it joins: it
#   sets limits for each configured resource, in resources or as a resourcesPolicy expression
#   over the app containers'. A missing limit is denied; a missing request only warned of.
#
#   data.sidecarsets.resources: resources, the resource names (cpu, memory); exemptGroups,
#   requesters it does not hold.
# scope: package
package sidecarsets.resources

deny contains {"rule": "limits", "field": sprintf("%s.resources.limits.%s", [path, name]), "msg": msg} if {
	not _exempt
	some path, c in _sidecars
	some name in data.sidecarsets.resources.resources
	not _set(c, "limits", name)
	msg := sprintf(
		"sidecar %s sets no %s limit, so it may take what the app it joins needs: set resources.limits.%s and requests.%s (or resourcesPolicy.resourcesExpr)",
		[c.name, name, name, name],
	)
}

# Requests only warn: the API server defaults a missing request to its limit, so the pod is still
# bounded and schedulable; it reserves the whole limit on every pod, a question of capacity.
warn contains {"rule": "requests", "field": sprintf("%s.resources.requests.%s", [path, name]), "msg": msg} if {
	not _exempt
	some path, c in _sidecars
	some name in data.sidecarsets.resources.resources
	_set(c, "limits", name)
	not _set(c, "requests", name)
	msg := sprintf(
		"sidecar %s sets no %s request, which defaults to its limit: every pod it joins reserves the whole limit; set resources.requests.%s to what it needs",
		[c.name, name, name],
	)
}

_sidecars[sprintf("spec.%s[%d]", [kind, i])] := c if {
	some kind in ["containers", "initContainers"]
	some i, c in input.sidecarSet.spec[kind]
}

_set(c, kind, name) if c.resources[kind][name]

# resourcesPolicy computes the sidecar's resources from the app containers' in each pod
# (OpenKruise refuses it beside resources): an expression for the name is a bound.
_set(c, kind, name) if c.resourcesPolicy.resourcesExpr[kind][name] != ""

# Break glass: system:masters bypasses RBAC and may remove this webhook anyway; refusing it only
# gets in the way of bootstrapping and recovery.
_exempt if {
	some group in input.userInfo.groups
	group in data.sidecarsets.resources.exemptGroups
}
