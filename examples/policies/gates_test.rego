package gates_test

import data.gates

_pod(metadata, spec) := {"metadata": object.union({"name": "p"}, metadata), "spec": object.union({"containers": [{"name": "app"}]}, spec)}

_deny(namespace, pod) := reasons if {
	reasons := gates.deny_injection with input as {"namespace": namespace, "pod": pod}
}

test_ordinary_pod_allowed if {
	_deny("default", _pod({"labels": {"app": "web"}}, {})) == set()
}

test_system_namespaces_denied if {
	every namespace in ["kube-system", "kube-public", "kube-node-lease"] {
		_deny(namespace, _pod({}, {})) == {sprintf("namespace %s is a system namespace", [namespace])}
	}
}

test_host_network_denied if {
	_deny("default", _pod({}, {"hostNetwork": true})) == {"pod uses hostNetwork"}
	_deny("default", _pod({}, {"hostNetwork": false})) == set()
}

test_opt_out_label if {
	_deny("default", _pod({"labels": {"sidecarset.kruise.io/inject": "false"}}, {})) == {"pod opted out with label sidecarset.kruise.io/inject=false"}
	_deny("default", _pod({"labels": {"sidecarset.kruise.io/inject": "true"}}, {})) == set()
}

test_opt_out_annotation if {
	_deny("default", _pod({"annotations": {"sidecarset.kruise.io/inject": "false"}}, {})) == {"pod opted out with annotation sidecarset.kruise.io/inject=false"}
}

test_every_reason_reported if {
	pod := _pod({"labels": {"sidecarset.kruise.io/inject": "false"}}, {"hostNetwork": true})
	_deny("kube-system", pod) == {
		"namespace kube-system is a system namespace",
		"pod uses hostNetwork",
		"pod opted out with label sidecarset.kruise.io/inject=false",
	}
}
