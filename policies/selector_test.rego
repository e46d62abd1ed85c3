package sidecarops.selector_test

import data.sidecarops.selector

_labels(m) := {"matchLabels": m, "matchExpressions": []}

_expr(key, operator, values) := {"matchLabels": {}, "matchExpressions": [{"key": key, "operator": operator, "values": values}]}

_exists(key, operator) := {"matchExpressions": [{"key": key, "operator": operator}]}

# Overlap is symmetric by construction; every case is checked in both argument orders.
_overlaps(a, b) if {
	selector.overlap(a, b)
	selector.overlap(b, a)
}

_disjoint(a, b) if {
	not selector.overlap(a, b)
	not selector.overlap(b, a)
}

# --- matching -------------------------------------------------------------------------------

test_match_labels if {
	selector.matches(_labels({"app": "web"}), {"app": "web", "tier": "a"})
	not selector.matches(_labels({"app": "web"}), {"app": "api"})
	not selector.matches(_labels({"app": "web"}), {})
}

test_match_in if {
	selector.matches(_expr("tier", "In", ["a", "b"]), {"tier": "b"})
	not selector.matches(_expr("tier", "In", ["a", "b"]), {"tier": "c"})
	not selector.matches(_expr("tier", "In", ["a", "b"]), {})
}

test_match_not_in if {
	selector.matches(_expr("tier", "NotIn", ["a"]), {"tier": "b"})
	selector.matches(_expr("tier", "NotIn", ["a"]), {})
	not selector.matches(_expr("tier", "NotIn", ["a"]), {"tier": "a"})
}

test_match_exists if {
	selector.matches(_exists("tier", "Exists"), {"tier": ""})
	not selector.matches(_exists("tier", "Exists"), {"app": "x"})
}

test_match_does_not_exist if {
	selector.matches(_exists("tier", "DoesNotExist"), {"app": "x"})
	not selector.matches(_exists("tier", "DoesNotExist"), {"tier": "a"})
}

# labels null (a manifest's `labels:` left empty) are no labels, as for labels.Set(nil) in Kubernetes.
test_match_null_labels if {
	selector.matches(_exists("tier", "DoesNotExist"), null)
	selector.matches(_expr("tier", "NotIn", ["a"]), null)
	not selector.matches(_exists("tier", "Exists"), null)
	not selector.matches(_expr("tier", "In", ["a"]), null)
	not selector.matches(_labels({"tier": "a"}), null)
	selector.matches({}, null)
	count(selector.failures(_exists("tier", "DoesNotExist"), null)) == 0
}

test_match_unknown_operator_fails_closed if {
	not selector.matches(_expr("tier", "badOp", ["a"]), {"tier": "a"})
}

test_match_all_terms_anded if {
	s := {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}
	selector.matches(s, {"app": "web", "tier": "a"})
	not selector.matches(s, {"app": "web", "tier": "b"})
	not selector.matches(s, {"app": "api", "tier": "a"})
}

# Kubernetes: a nil selector selects nothing, an empty one everything (OpenKruise's pod-selector rule
# that "empty selects nothing" is the caller's business, see is_empty).
test_match_null_and_empty if {
	not selector.matches(null, {"app": "web"})
	selector.matches({}, {"app": "web"})
	selector.matches(_labels({}), {})
}

test_is_empty if {
	selector.is_empty(null)
	selector.is_empty({})
	selector.is_empty(_labels({}))
	not selector.is_empty(_labels({"a": "b"}))
	not selector.is_empty(_exists("a", "Exists"))
}

test_failures_name_each_failed_term if {
	s := {"matchLabels": {"app": "web", "team": "x"}, "matchExpressions": [
		{"key": "tier", "operator": "In", "values": ["a", "b"]},
		{"key": "zone", "operator": "NotIn", "values": ["z1"]},
		{"key": "gpu", "operator": "Exists"},
		{"key": "spot", "operator": "DoesNotExist"},
		{"key": "odd", "operator": "Near", "values": ["x"]},
	]}
	selector.failures(s, {"app": "api", "team": "x", "zone": "z1", "spot": "true"}) == {
		{"term": "matchLabels app=web", "key": "app"},
		{"term": "tier In [a, b]", "key": "tier"},
		{"term": "zone NotIn [z1]", "key": "zone"},
		{"term": "gpu Exists", "key": "gpu"},
		{"term": "spot DoesNotExist", "key": "spot"},
		{"term": "odd Near (unsupported operator)", "key": "odd"},
	}
}

test_observed if {
	selector.observed({"app": "api"}, "app") == "has app=api"
	selector.observed({}, "tier") == "has no label tier"
}

# --- overlap: compat §4.4 V24-V32 -------------------------------------------------------------------

test_v24_same_label_overlaps if _overlaps(_labels({"a": "h"}), _labels({"a": "h"}))

test_v25_different_value_disjoint if _disjoint(_labels({"a": "h"}), _labels({"a": "i"}))

test_v26_different_keys_overlap if _overlaps(_labels({"a": "h"}), _labels({"b": "i"}))

test_v27_one_differing_key_disjoint if {
	_disjoint(_labels({"a": "h", "b": "i", "c": "j"}), _labels({"a": "h", "b": "x", "c": "j"}))
}

test_v28_in_with_value_overlaps if _overlaps(_labels({"a": "h"}), _expr("a", "In", ["h", "i", "j"]))

test_v29_in_without_value_disjoint if _disjoint(_labels({"a": "h"}), _expr("a", "In", ["i", "j"]))

test_v30_not_in_covering_disjoint if _disjoint(_expr("a", "NotIn", ["h", "i"]), _labels({"a": "h"}))

test_v31_exists_same_key_overlaps if _overlaps(_labels({"a": "h"}), _exists("a", "Exists"))

test_v32_does_not_exist_disjoint if _disjoint(_exists("a", "DoesNotExist"), _labels({"a": "h"}))

# --- overlap: decision D2 and the remaining branches -------------------------------------

# OpenKruise reports these as disjoint although the pod a=h,b=x matches both.
test_decision2_exists_other_key_overlaps if {
	_overlaps(_labels({"a": "h"}), _exists("b", "Exists"))
	_overlaps(_expr("a", "In", ["h"]), _exists("b", "Exists"))
}

test_exists_vs_does_not_exist_disjoint if _disjoint(_exists("a", "Exists"), _exists("a", "DoesNotExist"))

test_in_vs_in if {
	_overlaps(_expr("a", "In", ["h", "i"]), _expr("a", "In", ["i", "j"]))
	_disjoint(_expr("a", "In", ["h"]), _expr("a", "In", ["i"]))
}

test_not_in_partial_overlaps if {
	_overlaps(_expr("a", "NotIn", ["h"]), _expr("a", "In", ["h", "i"]))
	_overlaps(_expr("a", "NotIn", ["h"]), _labels({"b": "x"}))
}

test_exists_is_a_wildcard_for_values if {
	_overlaps(_exists("a", "Exists"), _expr("a", "In", ["z"]))
	_overlaps(_exists("a", "Exists"), _expr("a", "NotIn", ["z"]))
}

# OpenKruise's "ALL" marker would make a real value ALL a wildcard; here it is just a value.
test_value_all_is_not_a_wildcard if _disjoint(_labels({"a": "ALL"}), _labels({"a": "b"}))

test_empty_selectors_overlap_everything if {
	_overlaps({}, _labels({"a": "h"}))
	_overlaps(_labels({}), _exists("a", "DoesNotExist"))
}

test_null_overlaps_nothing if {
	not selector.overlap(null, _labels({"a": "h"}))
	not selector.overlap(_labels({"a": "h"}), null)
}
