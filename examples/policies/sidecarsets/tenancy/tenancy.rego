# METADATA
# title: Tenants in their own namespaces
# description: |-
#   A requester in a tenant group (tenant:<team>) acts for that team: its SidecarSets must set a
#   namespaceSelector, and every namespace it selects must carry the team's label (team=<team>),
#   one of its teams' when it is in several. Requesters in no tenant group are not this policy's
#   business (RBAC says whether they may write SidecarSets at all); the exempt groups' members act
#   for the platform.
#
#   The namespaces are the impact view's, those that exist: without it they are not known and the
#   SidecarSet is denied. A namespace created later is checked by no one, so a selector that does
#   not itself require the team label is warned of.
#
#   data.sidecarsets.tenancy: groupPrefix (tenant:), teamLabel (team), exemptGroups.
# scope: package
package sidecarsets.tenancy

deny contains {"rule": "namespace-selector", "field": "spec.namespaceSelector", "msg": msg} if {
	_tenant
	_selector == null
	msg := sprintf(
		"it selects every namespace, those created later too: as a member of %s, set spec.namespaceSelector to your namespaces (matchLabels %s: %s)",
		[_groups, data.sidecarsets.tenancy.teamLabel, _teams[0]],
	)
}

deny contains {"rule": "namespaces", "field": "spec.namespaceSelector", "msg": msg} if {
	_tenant
	_selector != null
	count(_foreign) > 0
	msg := sprintf(
		"it selects namespaces that are not labelled %s: %s; narrow spec.namespaceSelector to namespaces so labelled",
		[_wanted, concat(", ", _foreign)],
	)
}

deny contains {"rule": "namespaces", "field": "spec.namespaceSelector", "msg": msg} if {
	_tenant
	_selector != null
	not input.impact
	msg := sprintf("the namespaces it selects are not known (no impact view), so they cannot be checked to be labelled %s", [_wanted])
}

warn contains {"rule": "future-namespaces", "field": "spec.namespaceSelector", "msg": msg} if {
	_tenant
	_selector != null
	not _pinned
	msg := sprintf(
		"a namespace created later that spec.namespaceSelector selects gets these sidecars whichever team's it is: require %s in spec.namespaceSelector (matchLabels %s: %s)",
		[_wanted, data.sidecarsets.tenancy.teamLabel, _teams[0]],
	)
}

_prefix := data.sidecarsets.tenancy.groupPrefix

_teams := sort([trim_prefix(group, _prefix) | some group in input.userInfo.groups; startswith(group, _prefix)])

_groups := concat(", ", [concat("", [_prefix, team]) | some team in _teams])

_wanted := concat(" or ", [sprintf("%s=%s", [data.sidecarsets.tenancy.teamLabel, team]) | some team in _teams])

_tenant if {
	count(_teams) > 0
	not _exempt
}

_selector := object.get(input.sidecarSet.spec, "namespaceSelector", null)

# Each namespace it selects that is none of the requester's teams', with the team label it has.
_foreign := sort([sprintf("%s (%s)", [name, _team_of(ns.labels)]) |
	some name, ns in input.impact.namespaces
	not object.get(ns.labels, data.sidecarsets.tenancy.teamLabel, "") in _teams
])

_team_of(labels) := sprintf("%s=%s", [key, value]) if {
	key := data.sidecarsets.tenancy.teamLabel
	value := labels[key]
}

else := sprintf("no %s label", [data.sidecarsets.tenancy.teamLabel])

# The selector selects no namespace but the requester's teams': it requires the team label to
# have one of their values.
_pinned if _selector.matchLabels[data.sidecarsets.tenancy.teamLabel] in _teams

_pinned if {
	some e in _selector.matchExpressions
	e.key == data.sidecarsets.tenancy.teamLabel
	e.operator == "In"
	every value in e.values {
		value in _teams
	}
}

_exempt if {
	some group in input.userInfo.groups
	group in data.sidecarsets.tenancy.exemptGroups
}
