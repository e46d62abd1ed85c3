# METADATA
# title: Injection explanations
# description: |-
#   Why each SidecarSet does or does not inject into a pod, for the offline CLI.
#
#   Input: the match decision's. Unlike match this looks at every SidecarSet. It answers from the match
#   policy's own rules (obstacles, canary displacement, gates) with every SidecarSet made a candidate,
#   so an explanation cannot contradict a decision.
# scope: package
package sidecarops.explain

import data.sidecarops.match

# reasons[name]: ["matches"] exactly when name would be in match.decision.matched, else why not.
reasons[name] := _or_matches(why) if {
	some name, sidecarset in data.sidecarops.state.sidecarsets
	why := _why_not(name, sidecarset)
}

# A SidecarSet that fails on its own account is explained by that alone: canary displacement and
# gates only decide the fate of SidecarSets that would otherwise inject.
_why_not(name, sidecarset) := sort(match.obstacles(sidecarset)) if {
	not match.applies(sidecarset)
} else := array.concat(_replaced(name), _gated)

_applicable := {name | some name, sidecarset in data.sidecarops.state.sidecarsets; match.applies(sidecarset)}

_canaries := canaries if {
	canaries := match.canaries with match.applicable as _applicable
}

_replaced(name) := sort([sprintf("replaced by canary SidecarSet %s", [canary]) |
	some [canary, base] in _canaries
	base == name
])

_gated := [sprintf("denied by gate: %s", [reason]) | some reason in match.denied]

_or_matches(why) := ["matches"] if {
	count(why) == 0
} else := why
