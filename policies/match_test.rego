package sidecarops.match_test

import data.sidecarops.fixtures_test.by_name
import data.sidecarops.fixtures_test.canaries
import data.sidecarops.fixtures_test.collidable
import data.sidecarops.fixtures_test.labels_selector
import data.sidecarops.fixtures_test.pod
import data.sidecarops.fixtures_test.sidecarset
import data.sidecarops.match

# _decide evaluates the decision with the generated index replaced by what match.applies judges: the
# Go tests of bundles prove the generated index equal to match.applies.
_decide(sidecarsets, namespaces, namespace, labels) := decision if {
	pod_input := {"namespace": namespace, "pod": pod(labels)}
	applicable := {s.name |
		some s in sidecarsets
		match.applies(s) with input as pod_input with data.sidecarops.state.namespaces as namespaces
	}
	decision := match.decision with input as pod_input
		with data.sidecarops.state.sidecarsets as by_name(sidecarsets)
		with data.sidecarops.state.canaries as canaries(sidecarsets)
		with data.sidecarops.state.collidable as collidable(sidecarsets)
		with data.sidecarops.state.namespaces as namespaces
		with data.sidecarops.index.matches as applicable
}

_nginx(name, fields) := sidecarset(name, object.union({"selector": labels_selector({"app": "nginx"})}, fields))

_matched(sidecarsets, labels) := _decide(sidecarsets, {}, "default", labels).matched

# --- compat §4.5 S24-S28 ---------------------------------------------------------------------------

test_s24_no_namespace_objects_no_namespace_selector if {
	_decide([_nginx("s1", {})], {}, "app1", {"app": "nginx"}) == {"matched": ["s1"], "denied": [], "withheld": []}
}

test_s25_namespace_selector_matches_namespace_labels if {
	ss := _nginx("s1", {"namespaceSelector": labels_selector({"ns": "app1"})})
	_decide([ss], {"app1": {"labels": {"ns": "app1"}}}, "app1", {"app": "nginx"}).matched == ["s1"]
}

test_s26_namespace_selector_does_not_match if {
	ss := _nginx("s1", {"namespaceSelector": labels_selector({"ns": "app2"})})
	_decide([ss], {"app1": {"labels": {"ns": "app1"}}}, "app1", {"app": "nginx"}).matched == []
}

test_s27_s28_namespace_selector_picks_the_pods_namespace if {
	namespaces := {"app1": {"labels": {"app": "app1"}}, "app2": {"labels": {"app": "app2"}}}
	to_app1 := _nginx("s1", {"namespaceSelector": labels_selector({"app": "app1"})})
	to_app2 := _nginx("s1", {"namespaceSelector": labels_selector({"app": "app2"})})
	_decide([to_app1], namespaces, "app1", {"app": "nginx"}).matched == ["s1"]
	_decide([to_app2], namespaces, "app1", {"app": "nginx"}).matched == []
}

# An unknown namespace is taken to carry only kubernetes.io/metadata.name, which is also how a
# v1alpha1 spec.namespace reaches the policies.
test_unknown_namespace_has_its_name_label if {
	ss := _nginx("s1", {"namespaceSelector": labels_selector({"kubernetes.io/metadata.name": "app1"})})
	_decide([ss], {}, "app1", {"app": "nginx"}).matched == ["s1"]
	_decide([ss], {}, "app2", {"app": "nginx"}).matched == []
}

# --- selector and pausing (compat §1.12 step 3, compat §4.1 W1, W4) ---------------------------------------------

test_w1_pod_labels_do_not_match if _matched([_nginx("s1", {})], {"app": "doesnt-match"}) == []

test_w4_injection_paused if _matched([_nginx("s1", {"injectionPaused": true})], {"app": "nginx"}) == []

test_empty_or_unset_selector_never_matches if {
	_matched([sidecarset("s1", {"selector": labels_selector({})})], {"app": "nginx"}) == []
	_matched([sidecarset("s1", {"selector": {}})], {"app": "nginx"}) == []
	_matched([sidecarset("s1", {})], {"app": "nginx"}) == []
}

test_pod_without_labels if {
	ss := sidecarset("s1", {"selector": {"matchLabels": {}, "matchExpressions": [{"key": "opt-in", "operator": "DoesNotExist"}]}})
	decision := match.decision with input as {"namespace": "default", "pod": {"metadata": {"name": "bare"}}}
		with data.sidecarops.state.sidecarsets as by_name([ss])
		with data.sidecarops.state.canaries as canaries([ss])
		with data.sidecarops.index.matches as {"s1"}
	decision.matched == ["s1"]
}

# --- order and the index -------------------------------------------------------------------------

test_matched_sorted_by_name if {
	_matched([_nginx("zeta", {}), _nginx("alpha", {}), _nginx("mid", {})], {"app": "nginx"}) == ["alpha", "mid", "zeta"]
}

test_only_index_matches_inject if {
	decision := match.decision with input as {"namespace": "default", "pod": pod({"app": "nginx"})}
		with data.sidecarops.state.sidecarsets as by_name([_nginx("s1", {}), _nginx("s2", {})])
		with data.sidecarops.state.canaries as canaries([_nginx("s1", {}), _nginx("s2", {})])
		with data.sidecarops.index.matches as {"s2"}
	decision.matched == ["s2"]
}

# The engine's partial recompile: input.index names the SidecarSets whose compiled rules are out of
# date (stale, whatever those rules say) and those of them that admit the pod (fresh).
test_stale_index_rules_are_replaced_by_fresh_ones if {
	sets := [_nginx("kept", {}), _nginx("changed", {}), _nginx("added", {}), _nginx("unselected", {})]
	decision := match.decision with input as {
		"namespace": "default", "pod": pod({"app": "nginx"}),
		"index": {"stale": {"changed", "added", "unselected", "deleted"}, "fresh": {"changed", "added"}},
	}
		with data.sidecarops.state.sidecarsets as by_name(sets)
		with data.sidecarops.state.canaries as canaries(sets)
		with data.sidecarops.index.matches as {"kept", "changed", "unselected", "deleted"}
	decision.matched == ["added", "changed", "kept"]
}

# With one SidecarSet in the index, the stale list still applies: the decision's single-candidate
# branch reads applicable, not the index.
test_stale_single_index_match_is_dropped if {
	_single_stale(set()) == {"matched": [], "denied": [], "withheld": []}
	_single_stale({"added"}) == {"matched": ["added"], "denied": [], "withheld": []}
}

_single_stale(fresh) := decision if {
	sets := [_nginx("changed", {}), _nginx("added", {})]
	decision := match.decision with input as {
		"namespace": "default", "pod": pod({"app": "nginx"}),
		"index": {"stale": {"changed", "added"}, "fresh": fresh},
	}
		with data.sidecarops.state.sidecarsets as by_name(sets)
		with data.sidecarops.state.canaries as canaries(sets)
		with data.sidecarops.index.matches as {"changed"}
}

test_no_index_no_match if {
	decision := match.decision with input as {"namespace": "default", "pod": pod({"app": "nginx"})}
		with data.sidecarops.state.sidecarsets as by_name([_nginx("s1", {})])
		with data.sidecarops.state.canaries as canaries([_nginx("s1", {})])
	decision == {"matched": [], "denied": [], "withheld": []}
}

# --- canary (compat §1.21) ----------------------------------------------------------------------------

_canary(name, base, fields) := _nginx(name, object.union({"canary": true, "base": base, "updateType": "NotUpdate"}, fields))

test_canary_displaces_its_base if {
	_matched([_nginx("base", {}), _canary("base-canary", "base", {}), _nginx("other", {})], {"app": "nginx"}) == ["base-canary", "other"]
}

# Quirk Q7: the base is only dropped from pods the canary itself matches.
test_canary_not_matching_keeps_base if {
	canary := _canary("base-canary", "base", {"selector": labels_selector({"app": "nginx", "canary": "true"})})
	_matched([_nginx("base", {}), canary], {"app": "nginx"}) == ["base"]
	_matched([_nginx("base", {}), canary], {"app": "nginx", "canary": "true"}) == ["base-canary"]
}

# A canary alone on a pod injects: its base is another SidecarSet, which the pod does not select.
test_canary_alone_injects if {
	canary := _canary("base-canary", "base", {})
	_matched([sidecarset("base", {"selector": labels_selector({"app": "other"})}), canary], {"app": "nginx"}) == ["base-canary"]
}

test_paused_canary_keeps_base if {
	_matched([_nginx("base", {}), _canary("base-canary", "base", {"injectionPaused": true})], {"app": "nginx"}) == ["base"]
}

# --- administrators' gates ------------------------------------------------------------------------

test_gates_veto_the_pod if {
	decision := match.decision with input as {"namespace": "default", "pod": pod({"app": "nginx"})}
		with data.sidecarops.state.sidecarsets as by_name([_nginx("s1", {})])
		with data.sidecarops.state.canaries as canaries([_nginx("s1", {})])
		with data.sidecarops.index.matches as {"s1"}
		with data.gates.deny_injection as {"z: second", "a: first"}
	decision == {"matched": [], "denied": ["a: first", "z: second"], "withheld": []}
}

# --- SidecarSets that collide on the pod (decision D7) ---------------------------------------------

_withheld(sidecarsets) := _decide(sidecarsets, {}, "default", {"app": "nginx"})

test_the_older_of_two_colliding_sidecarsets_injects if {
	older := _nginx("zz-older", {"containers": ["proxy"], "created": "2026-11-26T10:00:00Z"})
	newer := _nginx("aa-newer", {"containers": ["proxy"], "created": "2026-11-26T10:00:01Z"})
	_withheld([older, newer]) == {"matched": ["zz-older"], "denied": [], "withheld": [["aa-newer", "zz-older"]]}
}

test_same_creation_time_the_first_name_injects if {
	a := _nginx("a", {"initContainers": ["init"], "created": "2026-11-26T10:00:00Z"})
	b := _nginx("b", {"initContainers": ["init"], "created": "2026-11-26T10:00:00Z"})
	_withheld([b, a]).withheld == [["b", "a"]]
}

test_a_container_and_an_init_container_of_one_name_do_not_collide if {
	a := _nginx("a", {"containers": ["x"]})
	b := _nginx("b", {"initContainers": ["x"]})
	_withheld([a, b]) == {"matched": ["a", "b"], "denied": [], "withheld": []}
}

test_volumes_collide_only_with_another_definition if {
	shared := {"volumes": {"data": {"name": "data", "emptyDir": {}}}}
	other := {"volumes": {"data": {"name": "data", "hostPath": {"path": "/x"}}}}
	_withheld([_nginx("a", shared), _nginx("b", shared)]).withheld == []
	_withheld([_nginx("a", shared), _nginx("b", other)]).withheld == [["b", "a"]]
}

# What stays never collides: in a chain a < b < c where only a-b and b-c collide, b and c are both
# withheld.
test_a_chain_withholds_everything_after_a_collision if {
	a := _nginx("a", {"containers": ["x"]})
	b := _nginx("b", {"containers": ["x", "y"]})
	c := _nginx("c", {"containers": ["y"]})
	_withheld([a, b, c]) == {"matched": ["a"], "denied": [], "withheld": [["b", "a"], ["c", "b"]]}
}

test_a_canary_displacing_its_base_is_not_a_collision if {
	base := _nginx("base", {"containers": ["x"]})
	canary := _canary("base-canary", "base", {"containers": ["x"]})
	_withheld([base, canary]) == {"matched": ["base-canary"], "denied": [], "withheld": []}
}
