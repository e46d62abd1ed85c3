# SidecarSet policies of the tests of check and of its parity with admission: one finding of each
# action, reading the requester, the impact view and, on UPDATE, the stored object.
package sidecarsets.platform

# Only the platform team injects into every namespace, those created later included.
deny contains {
	"msg": sprintf("%s may not inject into every namespace: only group platform may", [input.userInfo.username]),
	"rule": "owner",
	"field": "spec.namespaceSelector",
} if {
	input.impact.allNamespaces
	not "platform" in input.userInfo.groups
}

warn contains {"msg": sprintf("selects %d existing pods, more than 2: roll it out in steps", [input.impact.pods]), "rule": "blast-radius"} if {
	input.impact.pods > 2
}

warn contains {"msg": sprintf("changes the image of %s from %s", [c.name, old.image]), "rule": "image-change", "field": sprintf("spec.containers[%d].image", [i])} if {
	input.operation == "UPDATE"
	some i, c in input.sidecarSet.spec.containers
	some old in input.oldSidecarSet.spec.containers
	old.name == c.name
	old.image != c.image
}

dryrun contains sprintf("would refuse image %s: not from registry.example.com", [c.image]) if {
	some c in input.sidecarSet.spec.containers
	not startswith(c.image, "registry.example.com/")
}
