package sidecarsets.blast_radius_test

import data.sidecarsets.blast_radius
import data.sidecarsets.fixtures_test.create
import data.sidecarsets.fixtures_test.impact
import data.sidecarsets.fixtures_test.impact_all
import data.sidecarsets.fixtures_test.logging_agent
import data.sidecarsets.fixtures_test.mesh
import data.sidecarsets.fixtures_test.namespace
import data.sidecarsets.fixtures_test.user

_alice := user("alice", ["tenant:logging"])

_findings(sidecar_set, view) := {"deny": deny, "warn": warn} if {
	deny := blast_radius.deny with input as create(_alice, sidecar_set, view)
	warn := blast_radius.warn with input as create(_alice, sidecar_set, view)
}

_approved(sidecar_set, value) := json.patch(sidecar_set, [{"op": "add", "path": "/metadata/annotations", "value": {"sidecarops.io/approved-blast-radius": value}}])

# The shop runs 2 web pods; the marketplace 40 namespaces of 20 selected pods each.
_shop := impact({"shop": namespace("shop", {"mesh": "enabled"}, 2)})

_marketplace := impact({sprintf("store-%02d", [i]): namespace(sprintf("store-%02d", [i]), {"mesh": "enabled"}, 20) | some i in numbers.range(1, 40)})

_set_annotation := "set annotation sidecarops.io/approved-blast-radius to the ticket that approved it (matching ^[A-Z][A-Z0-9]+-[0-9]+$), or narrow it"

test_small_scoped_sidecar_set_admitted if {
	_findings(mesh, _shop) == {"deny": set(), "warn": set()}
}

test_every_namespace_needs_approval if {
	_findings(logging_agent, impact_all({"shop": namespace("shop", {}, 2)})) == {
		"deny": {{
			"rule": "all-namespaces",
			"field": "spec.namespaceSelector",
			"msg": concat(": ", ["it selects every namespace, those created later too", _set_annotation]),
		}},
		"warn": set(),
	}
	_findings(_approved(logging_agent, "OPS-1234"), impact_all({"shop": namespace("shop", {}, 2)})) == {"deny": set(), "warn": set()}
}

test_many_pods_need_approval if {
	_marketplace.pods == 800
	_findings(mesh, _marketplace) == {
		"deny": {{
			"rule": "pods",
			"field": "spec.selector",
			"msg": concat(": ", ["it selects 800 existing pods, over the 500 allowed without approval", _set_annotation]),
		}},
		"warn": set(),
	}
	_findings(_approved(mesh, "CHG-77"), _marketplace) == {"deny": set(), "warn": set()}

	# The limit itself is allowed.
	_findings(mesh, _marketplace) == {"deny": set(), "warn": set()} with data.sidecarsets.blast_radius.maxPods as 800
}

test_both_reasons if {
	everywhere := json.patch(mesh, [{"op": "remove", "path": "/spec/namespaceSelector"}])
	{f.rule | some f in _findings(everywhere, object.union(_marketplace, {"allNamespaces": true})).deny} == {"all-namespaces", "pods"}
}

test_approval_names_a_ticket if {
	every value in ["", "yes", "ops-1234", "OPS-", "see OPS-1234"] {
		found := _findings(_approved(mesh, value), _marketplace)
		{f.msg | some f in found.deny} == {sprintf("it selects 800 existing pods, over the 500 allowed without approval: annotation sidecarops.io/approved-blast-radius=%q names no ticket (matching ^[A-Z][A-Z0-9]+-[0-9]+$): set it to the one that approved it, or narrow the SidecarSet", [value])}
	}
}

test_unknown_pods_warned if {
	offline := {"operation": "CREATE", "userInfo": _alice, "sidecarSet": mesh}
	blast_radius.deny == set() with input as offline
	warned := blast_radius.warn with input as offline
	warned == {{
		"rule": "pods",
		"field": "spec.selector",
		"msg": "the pods it selects are not known (no impact view): over 500, it needs annotation sidecarops.io/approved-blast-radius",
	}}
	blast_radius.warn == set() with input as object.union(offline, {"sidecarSet": _approved(mesh, "OPS-1")})

	# Selecting every namespace needs no view to be seen.
	everywhere := {"operation": "CREATE", "userInfo": _alice, "sidecarSet": logging_agent}
	denied := blast_radius.deny with input as everywhere
	{f.rule | some f in denied} == {"all-namespaces"}
}

test_break_glass_group_exempt if {
	admin := user("kubernetes-admin", ["system:masters"])
	blast_radius.deny == set() with input as create(admin, logging_agent, _marketplace)
	blast_radius.warn == set() with input as {"operation": "CREATE", "userInfo": admin, "sidecarSet": mesh}
}
