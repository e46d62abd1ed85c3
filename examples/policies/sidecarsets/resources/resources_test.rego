package sidecarsets.resources_test

import data.sidecarsets.fixtures_test.create
import data.sidecarsets.fixtures_test.impact_all
import data.sidecarsets.fixtures_test.logging_agent
import data.sidecarsets.fixtures_test.mesh
import data.sidecarsets.fixtures_test.namespace
import data.sidecarsets.fixtures_test.user
import data.sidecarsets.resources

_review(sidecar_set) := create(user("alice", ["tenant:logging"]), sidecar_set, impact_all({"shop": namespace("shop", {}, 2)}))

_denied(sidecar_set) := found if {
	found := resources.deny with input as _review(sidecar_set)
}

_warned(sidecar_set) := found if {
	found := resources.warn with input as _review(sidecar_set)
}

_resources(sidecar_set, path, value) := json.patch(sidecar_set, [{"op": "add", "path": path, "value": value}])

test_limits_and_requests_admitted if {
	_denied(mesh) == set()
	_warned(mesh) == set()
}

test_limits_without_requests_warned if {
	# examples/logging: limits only; the API server requests 100m and 64Mi for every web and api pod.
	_denied(logging_agent) == set()
	_warned(logging_agent) == {
		{
			"rule": "requests", "field": "spec.containers[0].resources.requests.cpu",
			"msg": "sidecar log-agent sets no cpu request, which defaults to its limit: every pod it joins reserves the whole limit; set resources.requests.cpu to what it needs",
		},
		{
			"rule": "requests", "field": "spec.containers[0].resources.requests.memory",
			"msg": "sidecar log-agent sets no memory request, which defaults to its limit: every pod it joins reserves the whole limit; set resources.requests.memory to what it needs",
		},
	}
	_warned(_resources(logging_agent, "/spec/containers/0/resources/requests", {"cpu": "20m", "memory": "32Mi"})) == set()
}

test_missing_limits_denied if {
	no_memory := _resources(mesh, "/spec/initContainers/0/resources", {"limits": {"cpu": "100m"}, "requests": {"cpu": "10m", "memory": "16Mi"}})
	_denied(no_memory) == {{
		"rule": "limits", "field": "spec.initContainers[0].resources.limits.memory",
		"msg": "sidecar mesh-init sets no memory limit, so it may take what the app it joins needs: set resources.limits.memory and requests.memory (or resourcesPolicy.resourcesExpr)",
	}}

	# None at all: the limits are denied, and the requests wait for them (they would default to them).
	none := _resources(mesh, "/spec/containers/0/resources", {})
	{[f.rule, f.field] | some f in _denied(none)} == {
		["limits", "spec.containers[0].resources.limits.cpu"],
		["limits", "spec.containers[0].resources.limits.memory"],
	}
	_warned(none) == set()
}

test_resources_policy_bounds_the_sidecar if {
	derived := _resources(mesh, "/spec/containers/0/resources", {})
	with_policy := _resources(derived, "/spec/containers/0/resourcesPolicy", {
		"targetContainersMode": "sum",
		"targetContainersNameRegex": ".*",
		"resourcesExpr": {
			"limits": {"cpu": "max(cpu*50%, 50m)", "memory": "200Mi"},
			"requests": {"cpu": "max(cpu*50%, 50m)", "memory": "100Mi"},
		},
	})
	_denied(with_policy) == set()
	_warned(with_policy) == set()

	# An empty expression bounds nothing.
	no_cpu_limit := json.patch(with_policy, [{"op": "replace", "path": "/spec/containers/0/resourcesPolicy/resourcesExpr/limits/cpu", "value": ""}])
	{f.field | some f in _denied(no_cpu_limit)} == {"spec.containers[0].resources.limits.cpu"}
}

test_configured_resources if {
	storage := ["cpu", "memory", "ephemeral-storage"]
	{f.field | some f in _denied(mesh)} == {"spec.containers[0].resources.limits.ephemeral-storage", "spec.initContainers[0].resources.limits.ephemeral-storage"} with data.sidecarsets.resources.resources as storage
}

test_break_glass_group_exempt if {
	review := create(user("kubernetes-admin", ["system:masters"]), _resources(mesh, "/spec/containers/0/resources", {}), impact_all({}))
	resources.deny == set() with input as review
	resources.warn == set() with input as review
}
