# METADATA
# title: Labels the selectors test
# description: |-
#   The pod's labels and its namespace's labels, as every selector test reads them: the match policy,
#   and the index rules bundles generates (compiled with the policies, or alone with this module when
#   the engine compiles only the rules of SidecarSets that changed).
# scope: package
package sidecarops.labels

# Read through the full path (not object.get on input.pod): the engine converts only the parts of
# the pod that some policy reads, and a reference to input.pod as a whole would mean all of it.
default pod := {}

pod := input.pod.metadata.labels

# Offline input often has no Namespace objects; every real Namespace carries its name label.
namespace := labels if {
	labels := data.sidecarops.state.namespaces[input.namespace].labels
} else := {"kubernetes.io/metadata.name": input.namespace}
