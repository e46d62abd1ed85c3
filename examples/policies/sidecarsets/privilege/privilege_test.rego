package sidecarsets.privilege_test

import data.sidecarsets.fixtures_test.create
import data.sidecarsets.fixtures_test.impact
import data.sidecarsets.fixtures_test.impact_all
import data.sidecarsets.fixtures_test.logging_agent
import data.sidecarsets.fixtures_test.mesh
import data.sidecarsets.fixtures_test.namespace
import data.sidecarsets.fixtures_test.user
import data.sidecarsets.privilege

_opted_in := {"mesh": "enabled", "sidecarops.io/privileged-sidecars": "allowed"}

_alice := user("alice", ["tenant:mesh"])

_findings(sidecar_set, view) := {"deny": deny, "warn": warn} if {
	deny := privilege.deny with input as create(_alice, sidecar_set, view)
	warn := privilege.warn with input as create(_alice, sidecar_set, view)
}

_net_admin_msg(reason) := sprintf("sidecar mesh-init adds capability NET_ADMIN: allowed only where every namespace it selects is labelled sidecarops.io/privileged-sidecars=allowed, and %s; remove it, or set spec.namespaceSelector to namespaces so labelled", [reason])

_net_admin(reason) := {
	"rule": "capabilities",
	"field": "spec.initContainers[0].securityContext.capabilities.add[0]",
	"msg": _net_admin_msg(reason),
}

test_unprivileged_sidecar_admitted if {
	_findings(logging_agent, impact_all({"shop": namespace("shop", {}, 2)})) == {"deny": set(), "warn": set()}
	no_net_admin := json.patch(mesh, [{"op": "replace", "path": "/spec/initContainers/0/securityContext/capabilities/add", "value": ["NET_RAW"]}])
	_findings(no_net_admin, impact({"payments": namespace("payments", {"mesh": "enabled"}, 4)})) == {"deny": set(), "warn": set()}
	_findings(no_net_admin, impact({})) == {"deny": set(), "warn": set()}
}

test_namespaces_not_opted_in_denied if {
	view := impact({
		"payments": namespace("payments", {"mesh": "enabled"}, 4),
		"checkout": namespace("checkout", _opted_in, 6),
	})
	_findings(mesh, view) == {"deny": {_net_admin("it selects payments, which is not")}, "warn": set()}

	both := impact({
		"payments": namespace("payments", {"mesh": "enabled"}, 4),
		"checkout": namespace("checkout", {"mesh": "enabled", "sidecarops.io/privileged-sidecars": "yes"}, 6),
	})
	_findings(mesh, both).deny == {_net_admin("it selects checkout, payments, which are not")}
}

test_every_namespace_opted_in_admitted_with_a_warning if {
	view := impact({
		"payments": namespace("payments", _opted_in, 4),
		"checkout": namespace("checkout", _opted_in, 6),
	})

	# mesh=enabled selects them today; a namespace labelled mesh=enabled tomorrow is not asked.
	_findings(mesh, view) == {"deny": set(), "warn": {{
		"rule": "future-namespaces",
		"field": "spec.namespaceSelector",
		"msg": "a namespace created later that spec.namespaceSelector selects gets its privileged sidecars without being labelled sidecarops.io/privileged-sidecars=allowed: require the label in spec.namespaceSelector.matchLabels",
	}}}

	every selector in [
		{"matchLabels": _opted_in},
		{"matchLabels": {"mesh": "enabled"}, "matchExpressions": [{"key": "sidecarops.io/privileged-sidecars", "operator": "In", "values": ["allowed"]}]},
	] {
		pinned := json.patch(mesh, [{"op": "replace", "path": "/spec/namespaceSelector", "value": selector}])
		_findings(pinned, view) == {"deny": set(), "warn": set()}
	}

	# An In admitting other values does not require the opt-in.
	loose := json.patch(mesh, [{"op": "replace", "path": "/spec/namespaceSelector", "value": {"matchExpressions": [
		{"key": "sidecarops.io/privileged-sidecars", "operator": "In", "values": ["allowed", "pending"]},
	]}}])
	{f.rule | some f in _findings(loose, view).warn} == {"future-namespaces"}
}

test_selecting_no_namespace_yet if {
	# Nothing is selected to refuse it on; the warning says what comes.
	found := _findings(mesh, impact({}))
	found.deny == set()
	{f.rule | some f in found.warn} == {"future-namespaces"}

	not_opted_in := json.patch(mesh, [{"op": "add", "path": "/spec/namespaceSelector/matchExpressions", "value": [
		{"key": "sidecarops.io/privileged-sidecars", "operator": "NotIn", "values": ["allowed"]},
	]}])
	{f.rule | some f in _findings(not_opted_in, impact({})).warn} == {"future-namespaces"}
}

test_every_namespace_never_opted_in if {
	everywhere := json.patch(mesh, [{"op": "remove", "path": "/spec/namespaceSelector"}])
	view := impact_all({"payments": namespace("payments", _opted_in, 4)})
	_findings(everywhere, view) == {"deny": {_net_admin("it selects every namespace, those created later too")}, "warn": set()}
}

test_unknown_namespaces_never_opted_in if {
	offline := {"operation": "CREATE", "userInfo": _alice, "sidecarSet": mesh}
	privilege.deny == {_net_admin("the namespaces it selects are not known (no impact view)")} with input as offline
	privilege.warn == set() with input as offline
}

test_every_risk if {
	risky := json.patch(mesh, [
		{"op": "add", "path": "/spec/containers/0/securityContext", "value": {"privileged": true, "allowPrivilegeEscalation": true, "capabilities": {"add": ["cap_sys_admin", "NET_BIND_SERVICE"]}}},
		{"op": "add", "path": "/spec/containers/0/ports/-", "value": {"name": "metrics", "containerPort": 15090, "hostPort": 15090, "protocol": "TCP"}},
		{"op": "add", "path": "/spec/volumes", "value": [
			{"name": "config", "configMap": {"name": "mesh-config", "defaultMode": 420}},
			{"name": "cni", "hostPath": {"path": "/etc/cni/net.d", "type": ""}},
		]},
	])
	view := impact({"payments": namespace("payments", {"mesh": "enabled"}, 4)})
	{[f.rule, f.field] | some f in _findings(risky, view).deny} == {
		["privileged", "spec.containers[0].securityContext.privileged"],
		["privilege-escalation", "spec.containers[0].securityContext.allowPrivilegeEscalation"],
		["capabilities", "spec.containers[0].securityContext.capabilities.add[0]"],
		["capabilities", "spec.initContainers[0].securityContext.capabilities.add[0]"],
		["host-port", "spec.containers[0].ports[1].hostPort"],
		["host-path", "spec.volumes[1].hostPath"],
	}
	messages := {f.msg | some f in _findings(risky, view).deny}
	every what in [
		"sidecar mesh-proxy runs privileged",
		"sidecar mesh-proxy allows privilege escalation",
		"sidecar mesh-proxy adds capability cap_sys_admin",
		"volume cni mounts the node's /etc/cni/net.d",
		"sidecar mesh-proxy binds the node's port 15090",
	] {
		some msg in messages
		startswith(msg, concat(": ", [what, "allowed only where"]))
	}
}

test_break_glass_group_exempt if {
	admin := user("kubernetes-admin", ["system:masters"])
	privilege.deny == set() with input as create(admin, mesh, impact_all({}))
	privilege.warn == set() with input as create(admin, mesh, impact({}))
}
