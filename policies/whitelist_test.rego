package sidecarops.whitelist_test

import data.sidecarops.fixtures_test.labels_selector
import data.sidecarops.fixtures_test.sidecarset
import data.sidecarops.whitelist

# OpenKruise's test SidecarSet: labelled app=sidecar, patching key1 (compat §4.5 S18-S23).
_patching(keys) := sidecarset("sidecarset", {
	"labels": {"app": "sidecar"},
	"selector": labels_selector({"app": "nginx"}),
	"patchPodMetadata": [{"patchPolicy": "Retain", "annotations": {key: "v" | some key in keys}}],
})

# The violations with OpenKruise's messages: what sidecarops appends after "; " (the fix) is left out
# here and tested by the test_hint_ tests.
_violations(sidecarset, list) := {object.union(v, {"message": split(v.message, "; ")[0]}) |
	some v in _hinted(sidecarset, list)
}

_hinted(sidecarset, list) := violations if {
	violations := whitelist.violations with input as {"sidecarset": sidecarset} with data.whitelist as list
}

_not_found := {
	"field": "spec.patchPodMetadata",
	"value": "",
	"type": "Required",
	"message": "SidecarSet patch metadata whitelist not found",
}

_nothing_allowed := {
	"field": "spec.patchPodMetadata",
	"value": "",
	"type": "Forbidden",
	"message": "sidecarSet patch metadata annotation is not allowed",
}

_key_refused(i, key) := {
	"field": sprintf("spec.patchPodMetadata[%d].annotations[%s]", [i, key]),
	"value": key,
	"type": "Forbidden",
	"message": sprintf("sidecarSet patch metadata annotation(%s) is not allowed", [key]),
}

_rule(exprs) := {"allowedAnnotationKeyExprs": exprs}

_selected_rule(labels, exprs) := {"selector": labels_selector(labels), "allowedAnnotationKeyExprs": exprs}

test_s18_no_patches_need_no_whitelist if {
	_violations(sidecarset("plain", {"selector": labels_selector({"a": "b"})}), {}) == set()
}

test_s19_whitelist_not_found if _violations(_patching(["key1"]), {}) == {_not_found}

test_s20_rule_allows_key if _violations(_patching(["key1"]), {"rules": [_rule(["key.*"])]}) == set()

test_s21_rule_refuses_key if {
	_violations(_patching(["key1"]), {"rules": [_rule(["key2"])]}) == {_key_refused(0, "key1")}
}

test_s22_rule_for_other_sidecarsets if {
	_violations(_patching(["key1"]), {"rules": [_selected_rule({"app": "other"}, ["key.*"])]}) == {_nothing_allowed}
}

test_s23_rule_selects_sidecarset if {
	_violations(_patching(["key1"]), {"rules": [_selected_rule({"app": "sidecar"}, ["key.*"])]}) == set()
}

# Go's MatchString is unanchored: an administrator anchors explicitly.
test_expressions_are_unanchored if {
	_violations(_patching(["prefix-key1-suffix"]), {"rules": [_rule(["key1"])]}) == set()
	_violations(_patching(["prefix-key1"]), {"rules": [_rule(["^key1$"])]}) == {_key_refused(0, "prefix-key1")}
}

test_every_refused_key_reported if {
	sidecarset := object.union(_patching(["ok.io/a"]), {"patchPodMetadata": [
		{"patchPolicy": "Retain", "annotations": {"ok.io/a": "1", "bad": "2"}},
		{"patchPolicy": "Overwrite", "annotations": {"worse": "3"}},
	]})
	_violations(sidecarset, {"rules": [_rule(["^ok\\.io/"])]}) == {_key_refused(0, "bad"), _key_refused(1, "worse")}
}

test_expressions_of_several_rules_combine if {
	rules := {"rules": [_rule(["^a$"]), _selected_rule({"app": "sidecar"}, ["^b$"]), _selected_rule({"app": "other"}, ["^c$"])]}
	_violations(_patching(["a", "b", "c"]), rules) == {_key_refused(0, "c")}
}

test_empty_rules_allow_nothing if _violations(_patching(["key1"]), {"rules": []}) == {_nothing_allowed}

# --- the SidecarSetPatchPodMetadataDefaultsAllowed gate ------------------------------------------------

test_defaults_allowed_without_rules if {
	_violations(_patching(["key1"]), {"defaultsAllowed": true}) == set()
	_violations(_patching(["key1"]), {"rules": [], "defaultsAllowed": true}) == set()
	_violations(_patching(["key1"]), {"rules": [_selected_rule({"app": "other"}, ["key.*"])], "defaultsAllowed": true}) == set()
}

test_defaults_allowed_does_not_override_rules if {
	_violations(_patching(["key1"]), {"rules": [_rule(["key2"])], "defaultsAllowed": true}) == {_key_refused(0, "key1")}
}

test_defaults_allowed_false_is_the_default if {
	_violations(_patching(["key1"]), {"defaultsAllowed": false}) == {_not_found}
}

# --- invalid expressions -------------------------------------------------------------------------------

test_invalid_regex_is_reported if {
	_violations(_patching(["key1"]), {"rules": [_rule(["key.*", "key(("])]}) == {{
		"field": "spec.patchPodMetadata",
		"value": "key((",
		"type": "Required",
		"message": "sidecarSet patch metadata whitelist rules[0].allowedAnnotationKeyExprs[1] is not a valid regular expression: key((",
	}}
}

test_invalid_regex_alone_refuses_keys if {
	violations := _violations(_patching(["key1"]), {"rules": [_rule(["[z-a]"])]})
	count(violations) == 2
	_key_refused(0, "key1") in violations
}

# As OpenKruise, which compiles only the expressions of rules that apply to the SidecarSet.
test_invalid_regex_of_other_sidecarsets_ignored if {
	rules := {"rules": [_rule(["key.*"]), _selected_rule({"app": "other"}, ["key(("])]}
	_violations(_patching(["key1"]), rules) == set()
}

# --- what to fix ---------------------------------------------------------------------------------------

_messages(sidecarset, list) := {v.message | some v in _hinted(sidecarset, list)}

test_hint_whitelist_not_found if {
	_messages(_patching(["key1"]), {}) == {"SidecarSet patch metadata whitelist not found; give the administrators' whitelist: a bundle with root whitelist, or SidecarSet_PatchPodMetadata_WhiteList in the kruise-configuration ConfigMap"}
}

test_hint_no_rule_applies if {
	_messages(_patching(["b.io/x", "a.io/y"]), {"rules": [_selected_rule({"app": "other"}, ["key.*"])]}) == {`sidecarSet patch metadata annotation is not allowed; no whitelist rule applies to this SidecarSet (labels {"app":"sidecar"}): add a rule without selector, or with one matching these labels, whose allowedAnnotationKeyExprs allow ["a.io/y","b.io/x"]`}
}

test_hint_names_the_expression_to_add if {
	rules := {"rules": [_selected_rule({"app": "other"}, ["^c$"]), _rule(["^a$"]), _selected_rule({"app": "sidecar"}, ["^b$"])]}
	_messages(_patching(["logging.example.com/x"]), rules) == {`sidecarSet patch metadata annotation(logging.example.com/x) is not allowed; add the expression ^logging\.example\.com/x$ to allowedAnnotationKeyExprs of a whitelist rule that applies to this SidecarSet (rules[1], rules[2])`}
}

test_hint_names_the_rule_that_would_allow_it if {
	rules := {"rules": [_rule(["^a$"]), _selected_rule({"app": "other"}, ["^key"]), _selected_rule({"team": "x"}, ["key1"])]}
	_messages(_patching(["key1"]), rules) == {`sidecarSet patch metadata annotation(key1) is not allowed; rules[1], rules[2] would allow it, but not for this SidecarSet: its labels {"app":"sidecar"} do not match the selector; label the SidecarSet to match, or widen the selector`}
}
