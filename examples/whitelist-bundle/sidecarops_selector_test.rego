# A copy of policies/selector.rego for the tests of this directory (whitelist_test.rego), so that
# `opa test examples/whitelist-bundle` alone runs them against the policy sidecarops enforces.
# Generated: go test ./policies -run TestExampleWhitelistPolicyCopies -update-examples

# METADATA
# title: Kubernetes LabelSelector semantics
# description: |-
#   Kubernetes LabelSelector semantics shared by every sidecarops decision, so that matching,
#   explaining and conflict detection read selectors the same way.
#
#   A selector is {"matchLabels": {...}, "matchExpressions": [...]}; either part may be absent.
#   null is "no selector" and matches nothing (as metav1.LabelSelectorAsSelector(nil)); an empty
#   selector matches everything, as in Kubernetes. OpenKruise's pod selectors differ (an empty one
#   selects no pod, compat §1.3), so callers check is_empty themselves.
# scope: package
package whitelist_test.sidecarops.selector

# failures returns the terms of selector that labels do not satisfy, each as
# {"term": <the term as an administrator wrote it>, "key": <its label key>}.
# Matching is defined as "no failures" so that explanations list exactly what matching checks.
failures(selector, labels) := label_failures | expression_failures if {
	label_failures := {{"term": sprintf("matchLabels %s=%s", [key, value]), "key": key} |
		some key, value in object.get(selector, "matchLabels", {})
		not labels[key] == value
	}
	expression_failures := {{"term": _render(expression), "key": expression.key} |
		some expression in object.get(selector, "matchExpressions", [])
		not _holds(expression, labels)
	}
}

# matches holds exactly when failures is empty; it is written with `every` over the same term checks
# so that it stops at the first failing term (it runs on the admission path).
matches(selector, labels) if {
	is_object(selector)
	every key, value in object.get(selector, "matchLabels", {}) {
		labels[key] == value
	}
	every expression in object.get(selector, "matchExpressions", []) {
		_holds(expression, labels)
	}
}

is_empty(selector) if selector == null

is_empty(selector) if {
	is_object(selector)
	count(object.get(selector, "matchLabels", {})) == 0
	count(object.get(selector, "matchExpressions", [])) == 0
}

# observed completes a failed term's explanation with what the object actually carries.
observed(labels, key) := sprintf("has %s=%s", [key, value]) if {
	value := labels[key]
} else := sprintf("has no label %s", [key])

# Operators follow k8s.io/apimachinery labels.Requirement.Matches; an unknown operator (rejected by
# validation, but possible in administrators' data) never holds, so it fails closed.
_holds(expression, labels) if {
	expression.operator == "In"
	_value_listed(expression, labels)
}

_holds(expression, labels) if {
	expression.operator == "NotIn"
	not _value_listed(expression, labels)
}

_holds(expression, labels) if {
	expression.operator == "Exists"
	_labelled(labels, expression.key)
}

_holds(expression, labels) if {
	expression.operator == "DoesNotExist"
	not _labelled(labels, expression.key)
}

# A separate rule, as _value_listed below: inline, OPA hoists object.keys(labels) out of the `not`,
# so labels null (a manifest's `labels:` with no value, which Kubernetes reads as no labels) made
# DoesNotExist fail instead of hold. Found by policies/selector_property_test.go.
_labelled(labels, key) if {
	is_object(labels)
	key in object.keys(labels)
}

# A separate rule because OPA hoists `labels[key]` out of `not labels[key] in values`, which would
# make NotIn fail for a pod without the label instead of holding.
_value_listed(expression, labels) if labels[expression.key] in object.get(expression, "values", [])

_render(expression) := sprintf("%s %s [%s]", [expression.key, expression.operator, concat(", ", object.get(expression, "values", []))]) if {
	expression.operator in {"In", "NotIn"}
} else := sprintf("%s %s", [expression.key, expression.operator]) if {
	expression.operator in {"Exists", "DoesNotExist"}
} else := sprintf("%s %s (unsupported operator)", [expression.key, expression.operator])

# overlap is OpenKruise's util.IsSelectorOverlapping (compat §2.1): two selectors overlap unless one of
# them rules out, for some key, every value the other one allows. Unlike OpenKruise, an Exists term on
# a key the other selector does not mention never proves them disjoint: {a=h} and {b Exists} both
# match a pod labelled a=h,b=x (decision D2).
overlap(a, b) if {
	is_object(a)
	is_object(b)
	not _disjoint(a, b)
	not _disjoint(b, a)
}

# _disjoint checks s2's terms against the values s1 allows (OpenKruise's one-directional disjoint());
# s1's NotIn and DoesNotExist terms are only looked at from the other direction, as in OpenKruise.
_disjoint(s1, s2) if {
	some key, value in object.get(s2, "matchLabels", {})
	_restricted(s1, key)
	not value in _allowed(s1, key)
}

_disjoint(s1, s2) if {
	some expression in object.get(s2, "matchExpressions", [])
	expression.operator == "In"
	_restricted(s1, expression.key)
	count(_allowed(s1, expression.key) & {value | some value in expression.values}) == 0
}

_disjoint(s1, s2) if {
	some expression in object.get(s2, "matchExpressions", [])
	expression.operator == "NotIn"
	_restricted(s1, expression.key)
	count(_allowed(s1, expression.key) - {value | some value in expression.values}) == 0
}

_disjoint(s1, s2) if {
	some expression in object.get(s2, "matchExpressions", [])
	expression.operator == "DoesNotExist"
	_requires(s1, expression.key)
}

# _requires: every object s matches carries key (OpenKruise's "key in m").
_requires(s, key) if key in object.keys(object.get(s, "matchLabels", {}))

_requires(s, key) if {
	some expression in object.get(s, "matchExpressions", [])
	expression.key == key
	expression.operator in {"In", "Exists"}
}

# _restricted: s allows only the finite set _allowed(s, key). OpenKruise marks Exists with the value
# "ALL"; a flag is used here so that a real label value "ALL" is not mistaken for a wildcard.
_restricted(s, key) if {
	_requires(s, key)
	not _wildcard(s, key)
}

_wildcard(s, key) if {
	some expression in object.get(s, "matchExpressions", [])
	expression.key == key
	expression.operator == "Exists"
}

# OpenKruise unions matchLabels and In values of a key rather than intersecting them.
_allowed(s, key) := {value | value := s.matchLabels[key]} | {value |
	some expression in object.get(s, "matchExpressions", [])
	expression.key == key
	expression.operator == "In"
	some value in expression.values
}
