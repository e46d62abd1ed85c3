# METADATA
# title: Allowed registries
# description: |-
#   Every image a SidecarSet puts into pods comes from a registry the administrators trust: its
#   containers', its init containers', and a HotUpgrade sidecar's empty image, which runs in the
#   pod too.
#
#   data.sidecarsets.registries: allowedRegistries, the prefixes an image may start with (a
#   registry host, or a host and a path, ending at a "/"); exemptGroups, requesters it does not
#   hold.
# scope: package
package sidecarsets.registries

deny contains {"field": field, "msg": msg} if {
	not _exempt
	some field, image in _images
	ref := _reference(image)
	not _allowed(ref)
	msg := sprintf(
		"image %s is not from an allowed registry: use an image under %s",
		[_shown(image, ref), concat(", ", data.sidecarsets.registries.allowedRegistries)],
	)
}

_images[sprintf("spec.%s[%d].image", [kind, i])] := c.image if {
	some kind in ["containers", "initContainers"]
	some i, c in input.sidecarSet.spec[kind]
}

_images[sprintf("spec.containers[%d].upgradeStrategy.hotUpgradeEmptyImage", [i])] := image if {
	some i, c in input.sidecarSet.spec.containers
	image := c.upgradeStrategy.hotUpgradeEmptyImage
}

# A prefix ends at a path component: registry.example.com must not let registry.example.com.evil.io by.
_allowed(ref) if {
	some prefix in data.sidecarsets.registries.allowedRegistries
	startswith(ref, concat("", [trim_suffix(prefix, "/"), "/"]))
}

# _reference is the image as the container runtime resolves it: a first path component that is no
# host (no "." or ":", not localhost) is a Docker Hub repository, and a one-component name one of
# Docker Hub's library.
_reference(image) := image if {
	parts := split(image, "/")
	count(parts) > 1
	_host(parts[0])
} else := concat("", ["docker.io/", image]) if {
	contains(image, "/")
} else := concat("", ["docker.io/library/", image])

_host(component) if contains(component, ".")

_host(component) if contains(component, ":")

_host("localhost")

_shown(image, ref) := sprintf("%q", [image]) if image == ref

else := sprintf("%q (%s)", [image, ref])

# Break glass: system:masters bypasses RBAC and may remove this webhook anyway; refusing it only
# gets in the way of bootstrapping and recovery.
_exempt if {
	some group in input.userInfo.groups
	group in data.sidecarsets.registries.exemptGroups
}
