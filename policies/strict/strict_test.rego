package sidecarsets.strict_test

import data.sidecarsets.strict

# A SidecarSet as stored: its strategy defaulted (type RollingUpdate, maxUnavailable 1, partition 0)
# under what the test writes.
_stored(strategy) := {"spec": {
	"selector": {"matchLabels": {"app": "web"}},
	"updateStrategy": object.union({"type": "RollingUpdate", "maxUnavailable": 1, "partition": 0}, strategy),
}}

_warned(strategy) := found if {
	found := strict.warn with input as {"sidecarSet": _stored(strategy)}
}

# [field, rule] of each warning, the messages left to the tests that are about them.
_fields(strategy) := {[f.field, f.rule] | some f in _warned(strategy)}

test_defaults_are_no_mistake if {
	_warned({}) == set()
	_warned({"type": "NotUpdate"}) == set()
}

test_within_bounds if {
	_warned({"maxUnavailable": "100%", "partition": "50%", "paused": true, "selector": {"matchLabels": {"canary": "true"}}}) == set()
}

test_a_typo_of_the_type if {
	_warned({"type": "RollingUpdates"}) == {{
		"rule": "update-strategy-type",
		"field": "spec.updateStrategy.type",
		"msg": `Unsupported value: "RollingUpdates": supported values: "NotUpdate", "RollingUpdate": OpenKruise admits it and upgrades pods as with RollingUpdate, without validating the strategy`,
	}}
}

test_unchecked_values_as_rolling_update_would_refuse_them if {
	_warned({"type": "Rolling", "partition": -1, "maxUnavailable": "10"}) == {
		_typo("Rolling"),
		{
			"rule": "unchecked-strategy", "field": "spec.updateStrategy.partition",
			"msg": "Invalid value: -1: must be greater than or equal to 0 (as RollingUpdate would require)",
		},
		{
			"rule": "unchecked-strategy", "field": "spec.updateStrategy.maxUnavailable",
			"msg": `Invalid value: "10": a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%') (as RollingUpdate would require)`,
		},
	}
}

_typo(type) := f if {
	some f in _warned({"type": type})
}

test_the_same_values_under_rolling_update_are_validation_s if {
	# OpenKruise's validation refuses them: the strict policy has nothing to add.
	_warned({"partition": -1, "maxUnavailable": "10"}) == set()
}

test_partition_with_selector if {
	sel := {"matchLabels": {"canary": "true"}}
	_fields({"type": "Rolling", "partition": 2, "selector": sel}) == {
		["spec.updateStrategy.type", "update-strategy-type"],
		["spec.updateStrategy.partition", "unchecked-strategy"],
	}
	some f in _warned({"type": "Rolling", "partition": "0%", "selector": sel})
	f.msg == `Invalid value: "0%": Partition and Selector cannot be used together (as RollingUpdate would require)`

	# Partition 0, the default, is no partition.
	_fields({"type": "Rolling", "selector": sel}) == {["spec.updateStrategy.type", "update-strategy-type"]}
}

test_strategy_selector if {
	problems := {[f.field, f.msg] |
		some f in _warned({"type": "Rolling", "selector": {"matchExpressions": [
			{"key": "a", "operator": "In"},
			{"key": "b", "operator": "Exists", "values": ["x"]},
			{"key": "c", "operator": "in", "values": ["x"]},
			{"key": "d", "operator": "NotIn", "values": ["x"]},
		]}})
		f.rule == "unchecked-strategy"
	}
	problems == {
		["spec.updateStrategy.selector.matchExpressions[0].values", "Required value: must be specified when `operator` is 'In' or 'NotIn' (as RollingUpdate would require)"],
		["spec.updateStrategy.selector.matchExpressions[1].values", "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist' (as RollingUpdate would require)"],
		["spec.updateStrategy.selector.matchExpressions[2].operator", `Invalid value: "in": not a valid selector operator (as RollingUpdate would require)`],
	}
	some f in _warned({"type": "Rolling", "selector": {}})
	f.msg == `Invalid value: "<none>": empty selector is not valid for sidecarset. (as RollingUpdate would require)`
}

test_priority_strategy if {
	_fields({"type": "Rolling", "priorityStrategy": {
		"weightPriority": [
			{"weight": 101, "matchSelector": {"matchLabels": {"a": "b"}}},
			{"weight": 0, "matchSelector": {}},
			{"weight": -1, "matchSelector": {"matchLabels": {"a": "b"}}},
		],
		"orderPriority": [{"orderedKey": "rank"}, {"orderedKey": ""}],
	}}) == {
		["spec.updateStrategy.type", "update-strategy-type"],
		["spec.updateStrategy.priorityStrategy", "unchecked-strategy"],
		["spec.updateStrategy.priorityStrategy.weightPriority[0].weight", "unchecked-strategy"],
		["spec.updateStrategy.priorityStrategy.weightPriority[1].matchSelector", "unchecked-strategy"],
		["spec.updateStrategy.priorityStrategy.weightPriority[2].weight", "unchecked-strategy"],
		["spec.updateStrategy.priorityStrategy.orderPriority[1].orderedKey", "unchecked-strategy"],
	}
}

test_scatter_strategy if {
	problems := {[f.field, f.msg] |
		some f in _warned({"type": "Rolling", "scatterStrategy": [
			{"key": "zone", "value": "a"},
			{"key": "", "value": "b"},
			{"key": "zone", "value": "b"},
			{"key": "zone", "value": "a"},
		]})
		f.rule == "unchecked-strategy"
	}
	problems == {
		["spec.updateStrategy.scatterStrategy[1].key", "Required value: key should not be empty (as RollingUpdate would require)"],
		["spec.updateStrategy.scatterStrategy[3]", "Required value: duplicated key=zone value=a (as RollingUpdate would require)"],
	}
}

test_not_update_reads_none_of_the_rest if {
	_fields({
		"type": "NotUpdate", "paused": true, "selector": {}, "partition": 3, "maxUnavailable": "50%",
		"priorityStrategy": {"orderPriority": [{"orderedKey": "rank"}]}, "scatterStrategy": [{"key": "zone", "value": "a"}],
	}) == {[concat(".", ["spec.updateStrategy", key]), "ignored-strategy-field"] |
		some key in ["paused", "selector", "partition", "maxUnavailable", "priorityStrategy", "scatterStrategy"]
	}
	some f in _warned({"type": "NotUpdate", "paused": true})
	f.msg == "ignored: updateStrategy.type NotUpdate never upgrades pods"
}

test_not_update_written_defaults_cannot_be_told_apart if {
	_warned({"type": "NotUpdate", "paused": false, "maxUnavailable": 1, "partition": 0, "scatterStrategy": []}) == set()
}

test_max_unavailable if {
	_warned({"maxUnavailable": "150%"}) == {{
		"rule": "max-unavailable",
		"field": "spec.updateStrategy.maxUnavailable",
		"msg": `Invalid value: "150%": over 100%: every pod may be upgraded at once`,
	}}
	_fields({"type": "Rolling", "maxUnavailable": "101%"}) == {
		["spec.updateStrategy.type", "update-strategy-type"],
		["spec.updateStrategy.maxUnavailable", "max-unavailable"],
	}
	_warned({"maxUnavailable": 150}) == set() # pods, not a share of them
	{f.rule | some f in _warned({"type": "NotUpdate", "maxUnavailable": "150%"})} == {"ignored-strategy-field"}
}

test_max_unavailable_tuned if {
	found := strict.warn with input as {"sidecarSet": _stored({"maxUnavailable": "60%"})}
		with data.sidecarsets.strict.maxUnavailablePercent as 50
	found == {{
		"rule": "max-unavailable",
		"field": "spec.updateStrategy.maxUnavailable",
		"msg": `Invalid value: "60%": over 50%: 60% of the pods may be upgraded at once`,
	}}
	over := strict.warn with input as {"sidecarSet": _stored({"maxUnavailable": "100%"})}
		with data.sidecarsets.strict.maxUnavailablePercent as 50
	some f in over
	f.msg == `Invalid value: "100%": over 50%: every pod may be upgraded at once`
}

_impact(pods, namespaces) := found if {
	found := strict.warn with input as {
		"sidecarSet": _stored({}),
		"impact": {"allNamespaces": false, "namespaces": namespaces, "pods": pods},
	}
}

test_selector_matches_nothing if {
	shop := {"labels": {"kubernetes.io/metadata.name": "shop"}, "pods": 0, "podSecurity": {"enforce": "privileged", "enforceVersion": "latest"}}
	_impact(0, {"shop": shop, "bank": shop}) == {{
		"rule": "selector-matches-nothing",
		"field": "spec.selector",
		"msg": "selects none of the existing pods of the 2 namespace(s) it applies to",
	}}
	_impact(3, {"shop": object.union(shop, {"pods": 3})}) == set()
	_impact(0, {}) == set() # no namespace: nothing to judge it on
	_warned({}) == set() # no impact view
}

test_each_rule_has_its_action if {
	typo := {"type": "Rolling", "maxUnavailable": "150%"}
	review := {"sidecarSet": _stored(typo)}
	actions := {"update-strategy-type": "deny", "max-unavailable": "dryrun", "unchecked-strategy": "warn"}
	denied := strict.deny with input as review with data.sidecarsets.strict.actions as actions
	{f.rule | some f in denied} == {"update-strategy-type"}
	logged := strict.dryrun with input as review with data.sidecarsets.strict.actions as actions
	{f.rule | some f in logged} == {"max-unavailable"}
	warned := strict.warn with input as review with data.sidecarsets.strict.actions as actions
	warned == set()

	# off, or not listed: not reported.
	off := strict.warn with input as review with data.sidecarsets.strict.actions as {"update-strategy-type": "off"}
	off == set()
}

test_shipped_actions_warn if {
	{rule | some rule, action in data.sidecarsets.strict.actions; action == "warn"} == {
		"update-strategy-type", "unchecked-strategy", "ignored-strategy-field", "max-unavailable",
		"selector-matches-nothing",
	}
}
