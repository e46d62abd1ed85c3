# Which SidecarSets inject into a pod being admitted (ref §1.12 steps 2-5, §1.21).
#
# Input: {"namespace": <pod namespace>, "pod": <pod JSON>}.
# This runs on every pod admission with up to 10,000 SidecarSets in data, so it only ever looks at
# the generated index's candidates and at the few SidecarSets they name.
package sidecarops.match

import data.sidecarops.selector

# decision: matched names in injection order (by name, sidecarops decision 1); an administrator's
# gate vetoes the whole pod, so matched is empty whenever denied is not.
decision := {"matched": matched, "denied": denied}

denied := sort([reason | some reason in data.gates.deny_injection])

matched := [] if {
	count(denied) > 0
} else := sort(applicable - {base | some base in canary_bases(applicable)})

# applicable: candidates that would inject on their own account, before canaries displace bases.
# The index is only a superset, so each candidate is checked in full.
applicable contains name if {
	some name in data.sidecarops.index.candidates
	applies(data.sidecarops.state.sidecarsets[name])
}

applies(sidecarset) if count(obstacles(sidecarset)) == 0

# canary_bases maps each canary among names to the base it takes the pod from (ref §1.21 step 4).
canary_bases(names) := {name: sidecarset.base |
	some name in names
	sidecarset := data.sidecarops.state.sidecarsets[name]
	sidecarset.canary
}

# obstacles: why sidecarset cannot inject into the pod by itself, as sentences (empty: it can).
# The explain policy shows these very sentences, so an explanation cannot disagree with matching.
obstacles(sidecarset) := (_paused(sidecarset) | _pod_obstacles(sidecarset)) | _namespace_obstacles(sidecarset)

_paused(sidecarset) := {"injection paused (spec.injectionStrategy.paused)" | sidecarset.injectionPaused}

# OpenKruise injects nowhere with an unset or empty pod selector (ref §1.3), unlike Kubernetes'
# "empty selects everything"; the two cases are told apart only for the explanation.
_pod_obstacles(sidecarset) := {"selector: not set (spec.selector is required)"} if {
	object.get(sidecarset, "selector", null) == null
} else := {"selector: empty (an empty selector matches no pod)"} if {
	selector.is_empty(sidecarset.selector)
} else := {sprintf("selector: %s: pod %s", [failure.term, selector.observed(pod_labels, failure.key)]) |
	some failure in selector.failures(sidecarset.selector, pod_labels)
}

# A null effective namespaceSelector means every namespace. bundles folded a v1alpha1
# spec.namespace into it; that case is worded in terms of spec.namespace, which the user wrote.
_namespace_obstacles(sidecarset) := set() if {
	object.get(sidecarset, "namespaceSelector", null) == null
} else := {sprintf("spec.namespace %s: pod is in namespace %s", [sidecarset.namespace, input.namespace])} if {
	object.get(sidecarset, "namespace", "") != ""
	count(selector.failures(sidecarset.namespaceSelector, namespace_labels)) > 0
} else := {sprintf("namespaceSelector: %s: namespace %s %s", [failure.term, input.namespace, selector.observed(namespace_labels, failure.key)]) |
	some failure in selector.failures(sidecarset.namespaceSelector, namespace_labels)
}

pod_labels := object.get(input.pod, ["metadata", "labels"], {})

# Offline input often has no Namespace objects; every real Namespace carries its name label.
namespace_labels := labels if {
	labels := data.sidecarops.state.namespaces[input.namespace].labels
} else := {"kubernetes.io/metadata.name": input.namespace}
