# An administrator's gates: pods that no SidecarSet may inject into, whatever matches them.
#
# sidecarops evaluates data.gates.deny_injection with the pod decision's input,
# {"namespace": <pod namespace>, "pod": <pod JSON>}; every reason vetoes injection into that pod and
# is reported (sidecarctl explain, webhook audit). Keep the rules cheap: they run on every pod admission.
package gates

# Control-plane namespaces must keep working when a SidecarSet is broken.
system_namespaces := {"kube-system", "kube-public", "kube-node-lease"}

opt_out := "sidecarset.kruise.io/inject"

deny_injection contains sprintf("namespace %s is a system namespace", [input.namespace]) if {
	input.namespace in system_namespaces
}

# A host-network pod shares the node's network namespace: a proxy or agent sidecar would bind
# node ports.
deny_injection contains "pod uses hostNetwork" if input.pod.spec.hostNetwork == true

deny_injection contains sprintf("pod opted out with label %s=false", [opt_out]) if {
	input.pod.metadata.labels[opt_out] == "false"
}

deny_injection contains sprintf("pod opted out with annotation %s=false", [opt_out]) if {
	input.pod.metadata.annotations[opt_out] == "false"
}
