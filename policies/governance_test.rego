package sidecarops.governance_test

import data.sidecarops.governance

_findings(policies) := found if {
	found := governance.findings with data.sidecarsets as policies
}

test_no_policies_no_findings if {
	governance.findings == set()
}

test_each_set_is_its_action if {
	_findings({"registries": {
		"deny": {"image evil.io/x is not from our registry"},
		"warn": {"image latest tag"},
		"dryrun": {"would refuse"},
	}}) == {
		{"rule": "registries", "action": "deny", "message": "image evil.io/x is not from our registry", "field": ""},
		{"rule": "registries", "action": "warn", "message": "image latest tag", "field": ""},
		{"rule": "registries", "action": "dryrun", "message": "would refuse", "field": ""},
	}
}

test_object_findings_name_their_rule_and_field if {
	_findings({"strict": {"warn": [
		{"msg": "over 100%", "rule": "max-unavailable", "field": "spec.updateStrategy.maxUnavailable"},
		{"msg": "no rule of its own"},
		{"msg": "empty rule", "rule": ""},
	]}}) == {
		{"rule": "strict/max-unavailable", "action": "warn", "message": "over 100%", "field": "spec.updateStrategy.maxUnavailable"},
		{"rule": "strict", "action": "warn", "message": "no rule of its own", "field": ""},
		{"rule": "strict", "action": "warn", "message": "empty rule", "field": ""},
	}
}

test_policies_apart if {
	_findings({"a": {"deny": {"x"}}, "b": {"deny": {"x"}}, "c": {"config": {"n": 1}}}) == {
		{"rule": "a", "action": "deny", "message": "x", "field": ""},
		{"rule": "b", "action": "deny", "message": "x", "field": ""},
	}
}

test_malformed_findings_are_reported if {
	_findings({"p": {"deny": [7, {"rule": "r"}, {"msg": 3, "field": 4}]}}) == {
		{"rule": "p", "action": "deny", "message": "malformed finding (want a string or an object with msg): 7", "field": ""},
		{"rule": "p/r", "action": "deny", "message": `malformed finding (want a string msg): {"rule": "r"}`, "field": ""},
		{"rule": "p", "action": "deny", "message": `malformed finding (want a string msg): {"field": 4, "msg": 3}`, "field": ""},
	}
}
