package sidecarsets.registries_test

import data.sidecarsets.fixtures_test.create
import data.sidecarsets.fixtures_test.impact_all
import data.sidecarsets.fixtures_test.logging_agent
import data.sidecarsets.fixtures_test.mesh
import data.sidecarsets.fixtures_test.namespace
import data.sidecarsets.fixtures_test.user
import data.sidecarsets.registries

_alice := user("alice", ["tenant:logging"])

_view := impact_all({"shop": namespace("shop", {}, 2)})

_denied(sidecar_set) := found if {
	found := registries.deny with input as create(_alice, sidecar_set, _view)
}

_with_image(sidecar_set, path, image) := json.patch(sidecar_set, [{"op": "replace", "path": path, "value": image}])

test_docker_hub_image_denied if {
	# fluent/fluent-bit has no registry host: the runtime pulls it from Docker Hub.
	_denied(logging_agent) == {{
		"field": "spec.containers[0].image",
		"msg": `image "fluent/fluent-bit:3.2" (docker.io/fluent/fluent-bit:3.2) is not from an allowed registry: use an image under registry.example.com/, ghcr.io/sidecarops/`,
	}}
}

test_mirrored_image_admitted if {
	_denied(_with_image(logging_agent, "/spec/containers/0/image", "registry.example.com/logging/fluent-bit:3.2")) == set()
	_denied(mesh) == set()
}

test_init_containers_checked if {
	_denied(_with_image(mesh, "/spec/initContainers/0/image", "docker.io/istio/proxyv2:1.24.0")) == {{
		"field": "spec.initContainers[0].image",
		"msg": `image "docker.io/istio/proxyv2:1.24.0" is not from an allowed registry: use an image under registry.example.com/, ghcr.io/sidecarops/`,
	}}
}

# examples/envoy-hotupgrade: the idle twin runs hotUpgradeEmptyImage.
test_hot_upgrade_empty_image_checked if {
	hot := json.patch(mesh, [{"op": "replace", "path": "/spec/containers/0/upgradeStrategy", "value": {
		"upgradeType": "HotUpgrade",
		"hotUpgradeEmptyImage": "openkruise/hotupgrade-sample:empty",
	}}])
	_denied(hot) == {{
		"field": "spec.containers[0].upgradeStrategy.hotUpgradeEmptyImage",
		"msg": `image "openkruise/hotupgrade-sample:empty" (docker.io/openkruise/hotupgrade-sample:empty) is not from an allowed registry: use an image under registry.example.com/, ghcr.io/sidecarops/`,
	}}
	mirrored := _with_image(hot, "/spec/containers/0/upgradeStrategy/hotUpgradeEmptyImage", "registry.example.com/mesh/empty:1.0")
	_denied(mirrored) == set()
}

test_prefix_ends_at_a_path_component if {
	every image in ["registry.example.com.evil.io/mesh/proxy:1.24.0", "registry.example.com:5000/mesh/proxy:1.24.0", "ghcr.io/sidecarops-fork/agent:v0.1.0"] {
		{f.field | some f in _denied(_with_image(mesh, "/spec/containers/0/image", image))} == {"spec.containers[0].image"}
	}
	_denied(_with_image(mesh, "/spec/containers/0/image", "ghcr.io/sidecarops/agent:v0.1.0")) == set()
}

test_docker_hub_references_resolved if {
	hub := ["docker.io/library/"]
	every image in ["nginx:1.27", "library/nginx:1.27", "docker.io/library/nginx:1.27"] {
		found := _denied(_with_image(mesh, "/spec/containers/0/image", image)) with data.sidecarsets.registries.allowedRegistries as hub
		found == {{"field": "spec.initContainers[0].image", "msg": `image "registry.example.com/mesh/proxy-init:1.24.0" is not from an allowed registry: use an image under docker.io/library/`}}
	}

	# A host is a first component with "." or ":", or localhost; anything else is a Hub user.
	every image in ["localhost/proxy:1", "localhost:5000/proxy:1", "registry:5000/proxy:1"] {
		found := _denied(_with_image(mesh, "/spec/containers/0/image", image)) with data.sidecarsets.registries.allowedRegistries as ["localhost", "localhost:5000", "registry:5000"]
		not "spec.containers[0].image" in {f.field | some f in found}
	}
	found := _denied(_with_image(mesh, "/spec/containers/0/image", "localhost-proxy/proxy:1")) with data.sidecarsets.registries.allowedRegistries as ["localhost"]
	some f in found
	f.msg == `image "localhost-proxy/proxy:1" (docker.io/localhost-proxy/proxy:1) is not from an allowed registry: use an image under localhost`
}

test_break_glass_group_exempt if {
	admin := user("kubernetes-admin", ["system:masters"])
	registries.deny == set() with input as create(admin, logging_agent, _view)
}
