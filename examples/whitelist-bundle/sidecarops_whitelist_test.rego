# A copy of policies/whitelist.rego for the tests of this directory (whitelist_test.rego), so that
# `opa test examples/whitelist-bundle` alone runs them against the policy sidecarops enforces.
# Generated: go test ./policies -run TestExampleWhitelistPolicyCopies -update-examples

# METADATA
# title: patchPodMetadata annotation whitelist
# description: |-
#   Which pod annotations a SidecarSet may patch, per the administrators' whitelist (compat §1.18).
#
#   Input: {"sidecarset": <normalised SidecarSet>}. data.whitelist is the administrators' bundle (or
#   OpenKruise's kruise-configuration ConfigMap converted): {"rules": [...], "defaultsAllowed": bool}.
#   Unlike OpenKruise, which stops at the first error, every offending key is reported. Each message is
#   OpenKruise's, then "; " and what would fix it.
# scope: package
package whitelist_test.sidecarops.whitelist

import data.whitelist_test.sidecarops.selector

_patching if count(object.get(input.sidecarset, "patchPodMetadata", [])) > 0

# rules absent is OpenKruise's missing ConfigMap key; "rules": [] is a whitelist that allows nothing.
_found if "rules" in object.keys(data.whitelist)

# The feature gate SidecarSetPatchPodMetadataDefaultsAllowed.
_defaults_allowed if data.whitelist.defaultsAllowed == true

violations contains _violation("spec.patchPodMetadata", "", "Required", concat("; ", [
	"SidecarSet patch metadata whitelist not found",
	"give the administrators' whitelist: a bundle with root whitelist, or SidecarSet_PatchPodMetadata_WhiteList in the kruise-configuration ConfigMap",
])) if {
	_patching
	not _found
	not _defaults_allowed
}

# The gate only stands in for missing rules; it never overrides rules that exist but do not allow a key.
violations contains _violation("spec.patchPodMetadata", "", "Forbidden", message) if {
	_patching
	_found
	count(_exprs) == 0
	not _defaults_allowed
	message := sprintf("sidecarSet patch metadata annotation is not allowed; no whitelist rule applies to this SidecarSet (labels %s): add a rule without selector, or with one matching these labels, whose allowedAnnotationKeyExprs allow %s", [
		json.marshal(object.get(input.sidecarset, "labels", {})),
		json.marshal(sort(_patched_keys)),
	])
}

# OpenKruise rejects the SidecarSet when an applicable rule holds an invalid regex; say so rather than
# silently ignore the expression (regex.match would be an evaluation error).
violations contains _violation("spec.patchPodMetadata", expr, "Required", message) if {
	_patching
	some [i, j, expr] in _exprs
	not regex.is_valid(expr)
	message := sprintf("sidecarSet patch metadata whitelist rules[%d].allowedAnnotationKeyExprs[%d] is not a valid regular expression: %s", [i, j, expr])
}

violations contains _violation(field, key, "Forbidden", message) if {
	_patching
	count(_exprs) > 0
	some i, patch in input.sidecarset.patchPodMetadata
	some key, _ in object.get(patch, "annotations", {})
	not _allowed(key)
	field := sprintf("spec.patchPodMetadata[%d].annotations[%s]", [i, key])
	message := sprintf("sidecarSet patch metadata annotation(%s) is not allowed; %s", [key, _key_hint(key)])
}

_patched_keys contains key if {
	some patch in input.sidecarset.patchPodMetadata
	some key, _ in object.get(patch, "annotations", {})
}

# The rule that would allow key: one that does but does not apply to this SidecarSet, else an
# expression to add to one that applies. Keys are DNS names and paths: "." is their only regex
# metacharacter.
_key_hint(key) := msg if {
	elsewhere := sort({i |
		some i, rule in data.whitelist.rules
		not _applies(rule)
		some expr in object.get(rule, "allowedAnnotationKeyExprs", [])
		regex.is_valid(expr)
		regex.match(expr, key)
	})
	count(elsewhere) > 0
	msg := sprintf("%s would allow it, but not for this SidecarSet: its labels %s do not match the selector; label the SidecarSet to match, or widen the selector", [
		_rule_names(elsewhere),
		json.marshal(object.get(input.sidecarset, "labels", {})),
	])
} else := sprintf("add the expression ^%s$ to allowedAnnotationKeyExprs of a whitelist rule that applies to this SidecarSet (%s)", [
	replace(key, ".", "\\."),
	_rule_names(sort({i | some [i, _, _] in _exprs})),
])

_rule_names(indices) := concat(", ", [sprintf("rules[%d]", [i]) | some i in indices])

# Expressions of the rules that apply to this SidecarSet; a rule without selector applies to all.
_exprs contains [i, j, expr] if {
	some i, rule in data.whitelist.rules
	_applies(rule)
	some j, expr in object.get(rule, "allowedAnnotationKeyExprs", [])
}

_applies(rule) if object.get(rule, "selector", null) == null

_applies(rule) if selector.matches(rule.selector, object.get(input.sidecarset, "labels", {}))

# Unanchored, as Go's regexp.MatchString in OpenKruise.
_allowed(key) if {
	some [_, _, expr] in _exprs
	regex.is_valid(expr)
	regex.match(expr, key)
}

_violation(field, value, type, message) := {"field": field, "value": value, "type": type, "message": message}
