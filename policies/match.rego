# METADATA
# title: Pod injection decision
# description: |-
#   Which SidecarSets inject into a pod being admitted (compat §1.12 steps 2-5, compat §1.21).
#
#   Input: {"namespace": <pod namespace>, "pod": <pod JSON>}, and "index" (see applicable) from the engine.
#   This runs on every pod admission with up to 10,000 SidecarSets in data. Whether a SidecarSet
#   admits the pod on its own account (selector, namespace scope, paused) is compiled by bundles into
#   the generated module data.sidecarops.index, whose rules OPA's index looks up by the pod's labels;
#   this policy adds what involves several SidecarSets (canaries, gates, order).
# scope: package
package sidecarops.match

import data.sidecarops.labels
import data.sidecarops.selector

# decision: matched names in injection order (by name, decision D1); an administrator's
# gate vetoes the whole pod, so matched is empty whenever denied is not. withheld lists
# [name, other] for each SidecarSet left out because it collides with an older one on this pod.
# One rule with an else rather than a rule per field: every rule evaluated costs allocations, and
# this is evaluated per admission. The gates are read directly rather than through denied, whose
# default costs an evaluation of its own. A single candidate, the usual case, cannot collide with
# another, so its branches skip evaluating withheld: the same answer for a third fewer allocations.
# Fewer than two applicable SidecarSets are the candidates themselves: a canary displaces only its
# base, which is another SidecarSet (bundles never lists a canary as its own base), so that branch
# skips candidates and the canaries it would read. It reads the index itself, not applicable: a
# rule in between is an evaluation of its own on every pod, so the branch holds only without
# input.index (a partial recompile, see applicable), whose pods go to _by_candidates at once. The
# last two branches repeat _by_candidates' rather than refer to it, for the same reason, on every
# pod that two or more SidecarSets select. (OPA's rule index skips the input.index branch without
# evaluating it.)
decision := {"matched": [], "denied": sort(data.gates.deny_injection), "withheld": []} if {
	count(data.gates.deny_injection) > 0
} else := _by_candidates if {
	input.index
} else := {"matched": sort(matches), "denied": [], "withheld": []} if {
	matches := data.sidecarops.index.matches
	count(matches) < 2
} else := {"matched": sort(candidates), "denied": [], "withheld": []} if {
	count(candidates) < 2
} else := {"matched": sort(candidates - {name | some [name, _] in withheld}), "denied": [], "withheld": sort(withheld)}

# _by_candidates: decision's last two branches, for a partial recompile.
_by_candidates := {"matched": sort(candidates), "denied": [], "withheld": []} if {
	count(candidates) < 2
} else := {"matched": sort(candidates - {name | some [name, _] in withheld}), "denied": [], "withheld": sort(withheld)}

# Without canaries in the fleet nothing is displaced, and the else skips evaluating displaced.
candidates := applicable - displaced if {
	count(data.sidecarops.state.canaries) > 0
} else := applicable

# withheld: two SidecarSets that collide (a container name in the same list, or a volume name
# with another definition) are refused at admission, but two created at the same moment can both
# be admitted. Injecting both would give a pod the API server refuses, so the older one (creation
# time, then name) injects and the newer is withheld from this pod (decision D7). A chain A < B < C
# where only A–B and B–C collide withholds both B and C: what is injected never collides.
withheld contains [b, a] if {
	some b in _collidable
	some a in _collidable
	_collide(a, b)
	_older(a, b)
}

# _collidable: the candidates that share a name with another SidecarSet (bundles lists them in
# data.sidecarops.state.collidable); no other candidate can collide. Most fleets have none, and the
# pairs are compared among these alone. The index is read once, then looked up per candidate.
_collidable contains name if {
	index := data.sidecarops.state.collidable
	some name in candidates
	index[name]
}

_collide(a, b) if {
	a != b
	some list in ["containers", "initContainers"]
	some name in _doc(a)[list]
	name in _doc(b)[list]
}

_collide(a, b) if {
	a != b
	some volume, digest in _doc(a).volumeHashes
	other := _doc(b).volumeHashes[volume]
	other != digest
}

_older(a, b) if [object.get(_doc(a), "created", ""), a] < [object.get(_doc(b), "created", ""), b]

_doc(name) := data.sidecarops.state.sidecarsets[name]

# denied: the gates' reasons, sorted (explain shows them; decision reads the gates itself).
default denied := []

denied := sort(data.gates.deny_injection)

# applicable: SidecarSets that would inject on their own account, before canaries displace bases.
# When only a few SidecarSets of a large fleet changed, the engine does not recompile the index: it
# compiles their rules alone, evaluates them first and passes input.index, the names whose rules in
# data.sidecarops.index are out of date (stale) and those of them that admit the pod (fresh).
default applicable := set()

# An else rather than two rules: OPA evaluates every definition of a rule, and `not` costs an
# evaluation of its own.
applicable := (_indexed - input.index.stale) | input.index.fresh if {
	input.index
} else := data.sidecarops.index.matches

default _indexed := set()

_indexed := data.sidecarops.index.matches

# applies is the judgement the generated index compiles, stated over a SidecarSet document: the
# reference the index is tested against (bundles' tests) and what explain uses. It holds exactly when
# obstacles(sidecarset) is empty; both are built from the same selector terms.
applies(sidecarset) if {
	not sidecarset.injectionPaused
	not selector.is_empty(sidecarset.selector)
	selector.matches(sidecarset.selector, labels.pod)
	_namespace_matches(object.get(sidecarset, "namespaceSelector", null))
}

_namespace_matches(null)

_namespace_matches(namespace_selector) if selector.matches(namespace_selector, labels.namespace)

# canaries: [canary, base] for each applicable canary; the canary takes the pod from its base
# (compat §1.12 step 4). bundles lists the canaries in data.sidecarops.state.canaries (canary → base),
# so a fleet without canaries costs nothing here.
canaries contains [name, base] if {
	some name, base in data.sidecarops.state.canaries
	name in applicable
}

displaced contains base if some [_, base] in canaries

# obstacles: why sidecarset cannot inject into the pod by itself, as sentences (empty: it can).
# The explain policy shows these very sentences, so an explanation cannot disagree with matching.
obstacles(sidecarset) := (_paused(sidecarset) | _pod_obstacles(sidecarset)) | _namespace_obstacles(sidecarset)

_paused(sidecarset) := {"injection paused (spec.injectionStrategy.paused)" | sidecarset.injectionPaused}

# OpenKruise injects nowhere with an unset or empty pod selector (compat §1.3), unlike Kubernetes'
# "empty selects everything"; the two cases are told apart only for the explanation.
_pod_obstacles(sidecarset) := {"selector: not set (spec.selector is required)"} if {
	object.get(sidecarset, "selector", null) == null
} else := {"selector: empty (an empty selector matches no pod)"} if {
	selector.is_empty(sidecarset.selector)
} else := {sprintf("selector: %s: pod %s", [failure.term, selector.observed(labels.pod, failure.key)]) |
	some failure in selector.failures(sidecarset.selector, labels.pod)
}

# A null namespaceSelector means every namespace (a v1alpha1 spec.namespace reaches the policies
# as the namespaceSelector it converts into).
_namespace_obstacles(sidecarset) := set() if {
	object.get(sidecarset, "namespaceSelector", null) == null
} else := {sprintf("namespaceSelector: %s: namespace %s %s", [failure.term, input.namespace, selector.observed(labels.namespace, failure.key)]) |
	some failure in selector.failures(sidecarset.namespaceSelector, labels.namespace)
}
