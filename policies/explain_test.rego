package sidecarops.explain_test

import data.sidecarops.explain
import data.sidecarops.fixtures_test.by_name
import data.sidecarops.fixtures_test.canaries
import data.sidecarops.fixtures_test.labels_selector
import data.sidecarops.fixtures_test.pod
import data.sidecarops.fixtures_test.sidecarset
import data.sidecarops.match

_web := labels_selector({"app": "web"})

_sidecarsets := [
	sidecarset("matches", {"selector": _web}),
	sidecarset("wrong-app", {"selector": labels_selector({"app": "api"})}),
	sidecarset("tier", {"selector": {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}}),
	sidecarset("paused", {"selector": labels_selector({"app": "api"}), "injectionPaused": true}),
	sidecarset("no-selector", {}),
	sidecarset("empty-selector", {"selector": labels_selector({})}),
	sidecarset("other-namespace", {
		"selector": _web,
		"namespaceSelector": labels_selector({"kubernetes.io/metadata.name": "app1"}),
	}),
	sidecarset("prod-only", {
		"selector": _web,
		"namespaceSelector": {"matchLabels": {"env": "prod"}, "matchExpressions": [{"key": "team", "operator": "Exists"}]},
	}),
	sidecarset("base", {"selector": _web}),
	sidecarset("base-canary", {"selector": _web, "canary": true, "base": "base", "updateType": "NotUpdate"}),
]

_input := {"namespace": "default", "pod": pod({"app": "web"})}

_reasons := reasons if {
	reasons := explain.reasons with input as _input
		with data.sidecarops.state.sidecarsets as by_name(_sidecarsets)
		with data.sidecarops.state.canaries as canaries(_sidecarsets)
		with data.sidecarops.state.namespaces as {"default": {"labels": {"kubernetes.io/metadata.name": "default", "env": "dev"}}}
}

test_every_sidecarset_explained if {
	_reasons == {
		"matches": ["matches"],
		"wrong-app": ["selector: matchLabels app=api: pod has app=web"],
		"tier": ["selector: tier In [a, b]: pod has no label tier"],
		"paused": [
			"injection paused (spec.injectionStrategy.paused)",
			"selector: matchLabels app=api: pod has app=web",
		],
		"no-selector": ["selector: not set (spec.selector is required)"],
		"empty-selector": ["selector: empty (an empty selector matches no pod)"],
		"other-namespace": ["namespaceSelector: matchLabels kubernetes.io/metadata.name=app1: namespace default has kubernetes.io/metadata.name=default"],
		"prod-only": [
			"namespaceSelector: matchLabels env=prod: namespace default has env=dev",
			"namespaceSelector: team Exists: namespace default has no label team",
		],
		"base": ["replaced by canary SidecarSet base-canary"],
		"base-canary": ["matches"],
	}
}

# Gates only explain SidecarSets that would otherwise inject; the others keep their own reasons.
test_gates_explain_otherwise_matching_sidecarsets if {
	reasons := explain.reasons with input as _input
		with data.sidecarops.state.sidecarsets as by_name(_sidecarsets)
		with data.sidecarops.state.canaries as canaries(_sidecarsets)
		with data.gates.deny_injection as {"pod uses hostNetwork"}
	reasons.matches == ["denied by gate: pod uses hostNetwork"]
	reasons.base == ["replaced by canary SidecarSet base-canary", "denied by gate: pod uses hostNetwork"]
	reasons["wrong-app"] == ["selector: matchLabels app=api: pod has app=web"]
}

# explain must agree with the decision when the index holds what match.applies judges (bundles'
# tests prove the generated index does).
test_explain_agrees_with_match if {
	applicable := {s.name | some s in _sidecarsets; match.applies(s) with input as _input}
	decision := match.decision with input as _input
		with data.sidecarops.state.sidecarsets as by_name(_sidecarsets)
		with data.sidecarops.state.canaries as canaries(_sidecarsets)
		with data.sidecarops.index.matches as applicable
	{name | some name, why in _reasons; why == ["matches"]} == {name | some name in decision.matched}
}
