# Tests of this whitelist (whitelist/data.json) against the sidecarops whitelist policy, which
# sidecarops_whitelist_test.rego and sidecarops_selector_test.rego copy here so that
#   opa test examples/whitelist-bundle
# runs them alone. Kept out of the bundle itself: opa build --ignore '*_test.rego'.
package whitelist_test

import data.whitelist_test.sidecarops.whitelist

_patching(labels, key) := {"sidecarset": {
	"name": "example",
	"labels": labels,
	"patchPodMetadata": [{"patchPolicy": "Overwrite", "annotations": {key: "v"}}],
}}

_violations(labels, key) := violations if {
	violations := whitelist.violations with input as _patching(labels, key)
}

# Both are undefined, and so fail a test, if the policy or the whitelist is missing: a whitelist
# without rules refuses every key, but with "whitelist not found", not a refusal of the key.
_allowed(labels, key) if count(_violations(labels, key)) == 0

_refused(labels, key) if {
	some v in _violations(labels, key)
	v.field == sprintf("spec.patchPodMetadata[0].annotations[%s]", [key])
}

# rules[0].
test_scrape_allowed_for_everyone if {
	_allowed({}, "prometheus.io/scrape")
	_allowed({"team": "logging"}, "prometheus.io/scrape")
}

# rules[0], anchored at both ends: a longer key is another annotation.
test_scrape_is_exact if {
	_allowed({}, "prometheus.io/scrape")
	_refused({}, "prometheus.io/scrape-x")
	_refused({}, "x-prometheus.io/scrape")
}

# rules[1]: only SidecarSets labelled team=logging.
test_logging_keys_only_for_the_logging_team if {
	_allowed({"team": "logging"}, "logging.example.com/format")
	_refused({"team": "metrics"}, "logging.example.com/format")
	_refused({}, "logging.example.com/format")
}

# No rule allows anything else, the logging team included.
test_other_keys_refused if {
	_allowed({"team": "logging"}, "logging.example.com/format")
	_refused({"team": "logging"}, "example.com/anything")
}
