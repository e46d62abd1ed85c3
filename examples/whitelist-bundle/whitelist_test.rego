# Tests of this whitelist against the sidecarops whitelist policy:
#   opa test <sidecarops>/policies examples/whitelist-bundle
# (kept out of the bundle itself: opa build --ignore '*_test.rego').
package whitelist_test

import data.sidecarops.whitelist

_patching(labels, key) := {"sidecarset": {
	"name": "example",
	"labels": labels,
	"patchPodMetadata": [{"patchPolicy": "Overwrite", "annotations": {key: "v"}}],
}}

_allowed(labels, key) if count(whitelist.violations) == 0 with input as _patching(labels, key)

test_launch_priority_allowed_for_everyone if {
	_allowed({}, "apps.kruise.io/container-launch-priority")
	_allowed({"team": "logging"}, "apps.kruise.io/container-launch-priority")
}

# Anchored at both ends: a longer key is another annotation.
test_launch_priority_is_exact if not _allowed({}, "apps.kruise.io/container-launch-priority-x")

test_logging_keys_only_for_the_logging_team if {
	_allowed({"team": "logging"}, "logging.example.com/format")
	not _allowed({"team": "metrics"}, "logging.example.com/format")
	not _allowed({}, "logging.example.com/format")
}

test_other_keys_refused if not _allowed({"team": "logging"}, "example.com/anything")
