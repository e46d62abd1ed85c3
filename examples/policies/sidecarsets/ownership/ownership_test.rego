package sidecarsets.ownership_test

import data.sidecarsets.fixtures_test.create
import data.sidecarsets.fixtures_test.impact
import data.sidecarsets.fixtures_test.impact_all
import data.sidecarsets.fixtures_test.logging_agent
import data.sidecarsets.fixtures_test.mesh
import data.sidecarsets.fixtures_test.namespace
import data.sidecarsets.fixtures_test.update
import data.sidecarsets.fixtures_test.user
import data.sidecarsets.ownership

# mesh is labelled sidecarops.io/owner=mesh: group tenant:mesh owns it.
_erin := user("erin", ["tenant:mesh"])

_frank := user("frank", ["tenant:shop"])

_view := impact({"payments": namespace("payments", {"mesh": "enabled"}, 4)})

_denied(requester, old, new) := found if {
	found := ownership.deny with input as update(requester, old, new, _view)
}

_replace(sidecar_set, path, value) := json.patch(sidecar_set, [{"op": "replace", "path": path, "value": value}])

_selector_msg(key) := sprintf("only members of tenant:mesh, which owns this SidecarSet (label sidecarops.io/owner=mesh), may change spec.%s other than by adding requirements to it: keep every requirement of the stored one, or ask them", [key])

test_owners_change_anything if {
	wider := _replace(mesh, "/spec/selector", {"matchExpressions": [{"key": "mesh", "operator": "In", "values": ["enabled", "canary"]}]})
	handed_over := _replace(wider, "/metadata/labels", {"sidecarops.io/owner": "payments"})
	_denied(_erin, mesh, handed_over) == set()
}

test_others_may_not_widen if {
	canary := _replace(mesh, "/spec/selector", {"matchExpressions": [{"key": "mesh", "operator": "In", "values": ["enabled", "canary"]}]})
	_denied(_frank, mesh, canary) == {{"rule": "selector", "field": "spec.selector", "msg": _selector_msg("selector")}}

	everywhere := json.patch(mesh, [{"op": "remove", "path": "/spec/namespaceSelector"}])
	_denied(_frank, mesh, everywhere) == {{"rule": "selector", "field": "spec.namespaceSelector", "msg": _selector_msg("namespaceSelector")}}

	# Fewer values is narrower, but only requirements kept whole are recognised: refused.
	prod := _replace(mesh, "/spec/namespaceSelector", {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]})
	some_prod := _replace(prod, "/spec/namespaceSelector/matchExpressions/0/values", ["prod", "staging"])
	{f.field | some f in _denied(_frank, some_prod, prod)} == {"spec.namespaceSelector"}
}

test_others_may_narrow if {
	prod_only := _replace(mesh, "/spec/namespaceSelector", {
		"matchLabels": {"mesh": "enabled"},
		"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}],
	})
	_denied(_frank, mesh, prod_only) == set()

	# The same selector written another way keeps its requirements.
	rewritten := _replace(mesh, "/spec/selector", {"matchExpressions": [{"key": "mesh", "operator": "In", "values": ["enabled"]}]})
	_denied(_frank, mesh, rewritten) == set()

	# From every namespace to some.
	owned_everywhere := json.patch(logging_agent, [{"op": "add", "path": "/metadata/labels/sidecarops.io~1owner", "value": "mesh"}])
	scoped := json.patch(owned_everywhere, [{"op": "add", "path": "/spec/namespaceSelector", "value": {"matchLabels": {"logging": "enabled"}}}])
	ownership.deny == set() with input as update(_frank, owned_everywhere, scoped, impact({}))
}

test_others_change_the_rest if {
	upgraded := _replace(mesh, "/spec/containers/0/image", "registry.example.com/mesh/proxy:1.24.1")
	_denied(_frank, mesh, upgraded) == set()
}

test_owner_label_kept_by_others if {
	taken := _replace(mesh, "/metadata/labels/sidecarops.io~1owner", "shop")
	_denied(_frank, mesh, taken) == {{
		"rule": "owner-label",
		"field": "metadata.labels[sidecarops.io/owner]",
		"msg": `only members of tenant:mesh, which owns this SidecarSet, may change label sidecarops.io/owner to "shop": keep sidecarops.io/owner=mesh, or ask them`,
	}}
	dropped := json.patch(mesh, [{"op": "remove", "path": "/metadata/labels"}])
	{f.msg | some f in _denied(_frank, mesh, dropped)} == {"only members of tenant:mesh, which owns this SidecarSet, may remove label sidecarops.io/owner: keep sidecarops.io/owner=mesh, or ask them"}
}

test_unowned_and_new_sidecar_sets_not_held if {
	# logging-agent carries team=logging, no owner label: anyone may widen or label it.
	everywhere := json.patch(logging_agent, [{"op": "replace", "path": "/spec/selector/matchExpressions/0/operator", "value": "Exists"}])
	claimed := json.patch(everywhere, [{"op": "add", "path": "/metadata/labels/sidecarops.io~1owner", "value": "shop"}])
	ownership.deny == set() with input as update(_frank, logging_agent, claimed, impact_all({}))

	ownership.deny == set() with input as create(_frank, json.patch(mesh, [{"op": "remove", "path": "/spec/namespaceSelector"}]), impact_all({}))
}

test_platform_admins_act_for_every_owner if {
	carol := user("carol", ["platform-admins"])
	everywhere := json.patch(mesh, [{"op": "remove", "path": "/spec/namespaceSelector"}, {"op": "remove", "path": "/metadata/labels"}])
	_denied(carol, mesh, everywhere) == set()
}
