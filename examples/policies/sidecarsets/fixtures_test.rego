# Shared fixtures of the SidecarSet policies' tests: the input sidecarops gives them
# (docs/governing.md, "Input"), SidecarSets as admission stores them (v1beta1, defaulted).
package sidecarsets.fixtures_test

# examples/logging/sidecarset.yaml as stored: converted from v1alpha1 and defaulted, as
# `sidecarctl check` hands it to the policies. No namespaceSelector: it selects every namespace.
logging_agent := {
	"apiVersion": "apps.kruise.io/v1beta1",
	"kind": "SidecarSet",
	"metadata": {"name": "logging-agent", "labels": {"team": "logging"}},
	"spec": {
		"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]},
		"containers": [{
			"name": "log-agent",
			"image": "fluent/fluent-bit:3.2",
			"imagePullPolicy": "IfNotPresent",
			"podInjectPolicy": "AfterAppContainer",
			"resources": {"limits": {"cpu": "100m", "memory": "64Mi"}},
			"shareVolumePolicy": {"type": "enabled"},
			"terminationMessagePath": "/dev/termination-log",
			"terminationMessagePolicy": "File",
			"transferEnv": [{"envName": "LOG_LEVEL", "sourceContainerName": "web"}],
			"upgradeStrategy": {"upgradeType": "ColdUpgrade"},
			"volumeMounts": [{"mountPath": "/fluent-bit/etc", "name": "log-agent-config"}],
		}],
		"injectionStrategy": {},
		"revisionHistoryLimit": 10,
		"updateStrategy": {"maxUnavailable": 1, "partition": 0, "type": "RollingUpdate"},
		"volumes": [
			{"name": "log-agent-config", "configMap": {"defaultMode": 420, "name": "log-agent-config"}},
			{"name": "unused-catalogue-volume", "emptyDir": {}},
		],
	},
}

# A service mesh in the shape istio injects, scoped to namespaces labelled mesh=enabled: an init
# container that redirects the pod's traffic (NET_ADMIN, NET_RAW) and the proxy, both from the
# administrators' registry with requests and limits.
mesh := {
	"apiVersion": "apps.kruise.io/v1beta1",
	"kind": "SidecarSet",
	"metadata": {"name": "mesh-proxy", "labels": {"sidecarops.io/owner": "mesh"}},
	"spec": {
		"selector": {"matchLabels": {"mesh": "enabled"}},
		"namespaceSelector": {"matchLabels": {"mesh": "enabled"}},
		"initContainers": [{
			"name": "mesh-init",
			"image": "registry.example.com/mesh/proxy-init:1.24.0",
			"imagePullPolicy": "IfNotPresent",
			"args": ["--redirect-inbound", "--exclude-port=15000"],
			"resources": {
				"requests": {"cpu": "10m", "memory": "16Mi"},
				"limits": {"cpu": "100m", "memory": "32Mi"},
			},
			"securityContext": {
				"allowPrivilegeEscalation": false,
				"capabilities": {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]},
				"runAsUser": 0,
				"runAsNonRoot": false,
			},
			"terminationMessagePath": "/dev/termination-log",
			"terminationMessagePolicy": "File",
			"upgradeStrategy": {"upgradeType": "ColdUpgrade"},
		}],
		"containers": [{
			"name": "mesh-proxy",
			"image": "registry.example.com/mesh/proxy:1.24.0",
			"imagePullPolicy": "IfNotPresent",
			"podInjectPolicy": "BeforeAppContainer",
			"ports": [{"name": "admin", "containerPort": 15000, "protocol": "TCP"}],
			"resources": {
				"requests": {"cpu": "100m", "memory": "128Mi"},
				"limits": {"cpu": "1", "memory": "256Mi"},
			},
			"securityContext": {
				"allowPrivilegeEscalation": false,
				"capabilities": {"drop": ["ALL"]},
				"runAsNonRoot": true,
				"runAsUser": 1337,
			},
			"terminationMessagePath": "/dev/termination-log",
			"terminationMessagePolicy": "File",
			"upgradeStrategy": {"upgradeType": "ColdUpgrade"},
		}],
		"injectionStrategy": {},
		"revisionHistoryLimit": 10,
		"updateStrategy": {"maxUnavailable": 1, "partition": 0, "type": "RollingUpdate"},
	},
}

# namespace is one namespace of the impact view: its labels, with the name label every namespace
# carries, and the pods the selector selects there; Pod Security enforces nothing (privileged).
namespace(name, labels, pods) := {
	"labels": object.union(labels, {"kubernetes.io/metadata.name": name}),
	"pods": pods,
	"podSecurity": {"enforce": "privileged", "enforceVersion": "latest"},
}

# impact is the view of a SidecarSet whose namespaceSelector selects namespaces (name → namespace).
impact(namespaces) := {"allNamespaces": false, "namespaces": namespaces, "pods": sum([ns.pods | some ns in namespaces])}

# impact_all is the view of one without a namespaceSelector, over the cluster's namespaces.
impact_all(namespaces) := object.union(impact(namespaces), {"allNamespaces": true})

# user is a requester as the API server authenticates one: every user is in system:authenticated.
user(name, groups) := {
	"username": name,
	"uid": concat("-", ["uid", name]),
	"groups": array.concat(groups, ["system:authenticated"]),
	"extra": {},
}

create(requester, sidecar_set, view) := {
	"operation": "CREATE",
	"userInfo": requester,
	"sidecarSet": sidecar_set,
	"impact": view,
}

update(requester, old, sidecar_set, view) := object.union(
	create(requester, sidecar_set, view),
	{"operation": "UPDATE", "oldSidecarSet": old},
)
