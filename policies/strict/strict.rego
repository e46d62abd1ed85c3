# METADATA
# title: Strict SidecarSet findings
# description: |-
#   What OpenKruise admits in a SidecarSet but almost certainly is a mistake (docs/cli.md, "Strict
#   findings"): an updateStrategy.type with a typo, which OpenKruise neither refuses nor validates
#   the strategy of and then rolls out as a RollingUpdate; strategy fields NotUpdate never reads;
#   maxUnavailable over 100%; a selector that selects no existing pod.
#
#   It reads input.sidecarSet as it is stored, defaulted: a value defaulting writes (type
#   RollingUpdate; maxUnavailable 1 and partition 0, whatever the type) cannot be told from one
#   written, and is never reported.
#
#   data.sidecarsets.strict.actions gives each rule's action, deny, warn, dryrun or off; a rule not
#   listed reports nothing. maxUnavailablePercent is the largest percentage max-unavailable lets by.
# scope: package
package sidecarsets.strict

deny := _with_action("deny")

warn := _with_action("warn")

dryrun := _with_action("dryrun")

_with_action(action) := {f |
	some f in _findings
	data.sidecarsets.strict.actions[f.rule] == action
}

_finding(rule, field, msg) := {"rule": rule, "field": field, "msg": msg}

_strategy := object.get(input.sidecarSet.spec, "updateStrategy", {})

_type := object.get(_strategy, "type", "RollingUpdate")

# OpenKruise validates the strategy of a RollingUpdate only, and rolls out any type but NotUpdate.
_unchecked if not _type in {"RollingUpdate", "NotUpdate"}

_findings contains _finding("update-strategy-type", "spec.updateStrategy.type", msg) if {
	_unchecked
	msg := sprintf(
		`Unsupported value: %q: supported values: "NotUpdate", "RollingUpdate": OpenKruise admits it and upgrades pods as with RollingUpdate, without validating the strategy`,
		[_type],
	)
}

_findings contains _finding("unchecked-strategy", field, sprintf("%s (as RollingUpdate would require)", [problem])) if {
	_unchecked
	some [field, problem] in _rolling_update_problems
}

_findings contains _finding("ignored-strategy-field", concat(".", ["spec.updateStrategy", key]), msg) if {
	_type == "NotUpdate"
	some key, value in _strategy
	_ignored(key, value)
	msg := "ignored: updateStrategy.type NotUpdate never upgrades pods"
}

_findings contains _finding("max-unavailable", "spec.updateStrategy.maxUnavailable", msg) if {
	_type != "NotUpdate"
	pct := _percent(_strategy.maxUnavailable)
	limit := data.sidecarsets.strict.maxUnavailablePercent
	pct > limit
	msg := sprintf("Invalid value: %q: over %d%%: %s", [_strategy.maxUnavailable, limit, _at_once(pct)])
}

# The namespaces of the impact view hold existing pods, and the selector selects none of them.
_findings contains _finding("selector-matches-nothing", "spec.selector", msg) if {
	input.impact.pods == 0
	n := count(input.impact.namespaces)
	n > 0
	msg := sprintf("selects none of the existing pods of the %d namespace(s) it applies to", [n])
}

# NotUpdate reads none of the strategy but its type. Defaulting writes maxUnavailable 1 and
# partition 0 for every type: only other values are the author's.
_ignored("paused", true)

_ignored("selector", v) if v != null

_ignored("partition", v) if v != 0

_ignored("maxUnavailable", v) if v != 1

_ignored("priorityStrategy", v) if v != null

_ignored("scatterStrategy", v) if count(v) > 0

_percent(v) := to_number(trim_suffix(v, "%")) if {
	is_string(v)
	regex.match(`^[0-9]+%$`, v)
}

_at_once(pct) := "every pod may be upgraded at once" if pct >= 100

else := sprintf("%d%% of the pods may be upgraded at once", [pct])

# What OpenKruise's validation of a RollingUpdate strategy refuses, as [field, message], in its
# words; every problem rather than the first of each part. The syntax of label keys and values,
# and selectors that do not convert, are not checked.
_rolling_update_problems contains [concat(".", ["spec.updateStrategy", key]), msg] if {
	some key in ["partition", "maxUnavailable"]
	msg := _int_or_percent_problem(_strategy[key])
}

_rolling_update_problems contains ["spec.updateStrategy.partition", msg] if {
	_strategy.selector != null
	p := _strategy.partition
	_partition_set(p)
	msg := sprintf("Invalid value: %q: Partition and Selector cannot be used together", [sprintf("%v", [p])])
}

_rolling_update_problems contains ["spec.updateStrategy.selector", msg] if {
	count(object.get(_strategy.selector, "matchLabels", {})) == 0
	count(object.get(_strategy.selector, "matchExpressions", [])) == 0
	msg := `Invalid value: "<none>": empty selector is not valid for sidecarset.`
}

_rolling_update_problems contains [sprintf("spec.updateStrategy.selector.matchExpressions[%d].values", [i]), msg] if {
	some i, e in _strategy.selector.matchExpressions
	e.operator in {"In", "NotIn"}
	count(object.get(e, "values", [])) == 0
	msg := "Required value: must be specified when `operator` is 'In' or 'NotIn'"
}

_rolling_update_problems contains [sprintf("spec.updateStrategy.selector.matchExpressions[%d].values", [i]), msg] if {
	some i, e in _strategy.selector.matchExpressions
	e.operator in {"Exists", "DoesNotExist"}
	count(object.get(e, "values", [])) > 0
	msg := "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
}

_rolling_update_problems contains [sprintf("spec.updateStrategy.selector.matchExpressions[%d].operator", [i]), msg] if {
	some i, e in _strategy.selector.matchExpressions
	not e.operator in {"In", "NotIn", "Exists", "DoesNotExist"}
	msg := sprintf("Invalid value: %q: not a valid selector operator", [e.operator])
}

_rolling_update_problems contains ["spec.updateStrategy.priorityStrategy", msg] if {
	count(object.get(_strategy.priorityStrategy, "weightPriority", [])) > 0
	count(object.get(_strategy.priorityStrategy, "orderPriority", [])) > 0
	msg := "Required value: only one of weightPriority and orderPriority can be used"
}

_rolling_update_problems contains [sprintf("spec.updateStrategy.priorityStrategy.weightPriority[%d].weight", [i]), msg] if {
	some i, term in _strategy.priorityStrategy.weightPriority
	not _within(object.get(term, "weight", 0), 0, 100)
	msg := "Required value: weight must be valid number in the range 1-100"
}

_rolling_update_problems contains [sprintf("spec.updateStrategy.priorityStrategy.weightPriority[%d].matchSelector", [i]), msg] if {
	some i, term in _strategy.priorityStrategy.weightPriority
	count(object.get(term.matchSelector, "matchLabels", {})) == 0
	count(object.get(term.matchSelector, "matchExpressions", [])) == 0
	msg := "Required value: selector can not be empty"
}

_rolling_update_problems contains [sprintf("spec.updateStrategy.priorityStrategy.orderPriority[%d].orderedKey", [i]), msg] if {
	some i, term in _strategy.priorityStrategy.orderPriority
	object.get(term, "orderedKey", "") == ""
	msg := "Required value: order key can not be empty"
}

_rolling_update_problems contains [sprintf("spec.updateStrategy.scatterStrategy[%d].key", [i]), msg] if {
	some i, term in _strategy.scatterStrategy
	object.get(term, "key", "") == ""
	msg := "Required value: key should not be empty"
}

_rolling_update_problems contains [sprintf("spec.updateStrategy.scatterStrategy[%d]", [i]), msg] if {
	some i, term in _strategy.scatterStrategy
	object.get(term, "key", "") != ""
	some j, earlier in _strategy.scatterStrategy
	j < i
	earlier == term
	msg := sprintf("Required value: duplicated key=%s value=%s", [term.key, object.get(term, "value", "")])
}

_int_or_percent_problem(v) := sprintf("Invalid value: %d: must be greater than or equal to 0", [v]) if {
	is_number(v)
	v < 0
}

_int_or_percent_problem(v) := sprintf(
	`Invalid value: %q: a valid percent string must be a numeric string followed by an ending '%%' (e.g. '1%%',  or '93%%', regex used for validation is '[0-9]+%%')`,
	[v],
) if {
	is_string(v)
	not regex.match(`^[0-9]+%$`, v)
}

# A "set" partition is any percentage, even "0%", or a non-zero integer.
_partition_set(p) if is_string(p)

_partition_set(p) if {
	is_number(p)
	p != 0
}

_within(n, low, high) if {
	n >= low
	n <= high
}
