# METADATA
# title: patchPodMetadata annotation whitelist
# description: |-
#   Which pod annotations a SidecarSet may patch, per the administrators' whitelist (compat §1.18).
#
#   Input: {"sidecarset": <normalised SidecarSet>}. data.whitelist is the administrators' bundle (or
#   OpenKruise's kruise-configuration ConfigMap converted): {"rules": [...], "defaultsAllowed": bool}.
#   Unlike OpenKruise, which stops at the first error, every offending key is reported.
# scope: package
package sidecarops.whitelist

import data.sidecarops.selector

_patching if count(object.get(input.sidecarset, "patchPodMetadata", [])) > 0

# rules absent is OpenKruise's missing ConfigMap key; "rules": [] is a whitelist that allows nothing.
_found if "rules" in object.keys(data.whitelist)

# The feature gate SidecarSetPatchPodMetadataDefaultsAllowed.
_defaults_allowed if data.whitelist.defaultsAllowed == true

violations contains _violation("spec.patchPodMetadata", "", "Required", "SidecarSet patch metadata whitelist not found") if {
	_patching
	not _found
	not _defaults_allowed
}

# The gate only stands in for missing rules; it never overrides rules that exist but do not allow a key.
violations contains _violation("spec.patchPodMetadata", "", "Forbidden", "sidecarSet patch metadata annotation is not allowed") if {
	_patching
	_found
	count(_exprs) == 0
	not _defaults_allowed
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
	message := sprintf("sidecarSet patch metadata annotation(%s) is not allowed", [key])
}

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
