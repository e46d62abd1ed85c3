package sidecarsets.tenancy_test

import data.sidecarsets.fixtures_test.create
import data.sidecarsets.fixtures_test.impact
import data.sidecarsets.fixtures_test.impact_all
import data.sidecarsets.fixtures_test.logging_agent
import data.sidecarsets.fixtures_test.namespace
import data.sidecarsets.fixtures_test.update
import data.sidecarsets.fixtures_test.user
import data.sidecarsets.tenancy

_alice := user("alice", ["tenant:shop"])

_shop := {
	"shop-prod": namespace("shop-prod", {"team": "shop", "env": "prod"}, 8),
	"shop-dev": namespace("shop-dev", {"team": "shop", "env": "dev"}, 2),
}

_scoped(selector) := json.patch(logging_agent, [{"op": "add", "path": "/spec/namespaceSelector", "value": selector}])

_findings(review) := {"deny": deny, "warn": warn} if {
	deny := tenancy.deny with input as review
	warn := tenancy.warn with input as review
}

_future := {
	"rule": "future-namespaces",
	"field": "spec.namespaceSelector",
	"msg": "a namespace created later that spec.namespaceSelector selects gets these sidecars whichever team's it is: require team=shop in spec.namespaceSelector (matchLabels team: shop)",
}

test_own_namespaces_admitted if {
	_findings(create(_alice, _scoped({"matchLabels": {"team": "shop"}}), impact(_shop))) == {"deny": set(), "warn": set()}
	pinned := _scoped({"matchLabels": {"env": "prod"}, "matchExpressions": [{"key": "team", "operator": "In", "values": ["shop"]}]})
	_findings(create(_alice, pinned, impact({"shop-prod": _shop["shop-prod"]}))) == {"deny": set(), "warn": set()}
}

test_every_namespace_denied if {
	# The namespace-selector finding alone: that others' namespaces are selected follows from it.
	cluster := object.union(_shop, {"kube-system": namespace("kube-system", {}, 0)})
	_findings(create(_alice, logging_agent, impact_all(cluster))) == {
		"deny": {{
			"rule": "namespace-selector",
			"field": "spec.namespaceSelector",
			"msg": "it selects every namespace, those created later too: as a member of tenant:shop, set spec.namespaceSelector to your namespaces (matchLabels team: shop)",
		}},
		"warn": set(),
	}
}

test_other_teams_namespaces_denied if {
	by_name := _scoped({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["shop-prod", "payments", "kube-system"]}]})
	view := impact({
		"shop-prod": _shop["shop-prod"],
		"payments": namespace("payments", {"team": "payments"}, 12),
		"kube-system": namespace("kube-system", {}, 0),
	})
	_findings(create(_alice, by_name, view)) == {
		"deny": {{
			"rule": "namespaces",
			"field": "spec.namespaceSelector",
			"msg": "it selects namespaces that are not labelled team=shop: kube-system (no team label), payments (team=payments); narrow spec.namespaceSelector to namespaces so labelled",
		}},
		"warn": {_future},
	}
}

test_selector_not_requiring_the_team_warned if {
	# env=prod selects shop-prod alone today; payments-prod, created tomorrow, would get the sidecar.
	today := impact({"shop-prod": _shop["shop-prod"]})
	_findings(create(_alice, _scoped({"matchLabels": {"env": "prod"}}), today)) == {"deny": set(), "warn": {_future}}

	# Any team's.
	any_team := _scoped({"matchLabels": {"env": "prod"}, "matchExpressions": [{"key": "team", "operator": "Exists"}]})
	_findings(create(_alice, any_team, today)) == {"deny": set(), "warn": {_future}}
}

test_unknown_namespaces_denied if {
	offline := {"operation": "CREATE", "userInfo": _alice, "sidecarSet": _scoped({"matchLabels": {"team": "shop"}})}
	_findings(offline) == {
		"deny": {{
			"rule": "namespaces",
			"field": "spec.namespaceSelector",
			"msg": "the namespaces it selects are not known (no impact view), so they cannot be checked to be labelled team=shop",
		}},
		"warn": set(),
	}
	everywhere := {"operation": "CREATE", "userInfo": _alice, "sidecarSet": logging_agent}
	{f.rule | some f in _findings(everywhere).deny} == {"namespace-selector"}
}

test_member_of_several_teams if {
	bob := user("bob", ["tenant:shop", "tenant:payments"])
	both := _scoped({"matchExpressions": [{"key": "team", "operator": "In", "values": ["shop", "payments"]}]})
	view := impact(object.union(_shop, {"payments": namespace("payments", {"team": "payments"}, 12)}))
	_findings(create(bob, both, view)) == {"deny": set(), "warn": set()}

	# Not payments' is shop's today, and anyone's tomorrow.
	not_payments := _scoped({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["payments"]}]})
	{f.rule | some f in _findings(create(bob, not_payments, impact(_shop))).warn} == {"future-namespaces"}

	wider := _scoped({"matchExpressions": [{"key": "team", "operator": "In", "values": ["shop", "payments", "search"]}]})
	found := _findings(create(bob, wider, object.union(view, {"namespaces": {"search": namespace("search", {"team": "search"}, 3)}})))
	{f.msg | some f in found.deny} == {"it selects namespaces that are not labelled team=payments or team=shop: search (team=search); narrow spec.namespaceSelector to namespaces so labelled"}
	{f.rule | some f in found.warn} == {"future-namespaces"}
}

test_updates_held_alike if {
	old := _scoped({"matchLabels": {"team": "shop"}})
	widened := _scoped({"matchLabels": {"env": "prod"}})
	view := impact({"shop-prod": _shop["shop-prod"], "payments-prod": namespace("payments-prod", {"team": "payments", "env": "prod"}, 5)})
	{f.rule | some f in _findings(update(_alice, old, widened, view)).deny} == {"namespaces"}
}

test_platform_and_other_requesters_not_held if {
	carol := user("carol", ["platform-admins", "tenant:shop"])
	dave := user("dave", ["developers"])
	every requester in [carol, dave] {
		_findings(create(requester, logging_agent, impact_all(_shop))) == {"deny": set(), "warn": set()}
	}
}
