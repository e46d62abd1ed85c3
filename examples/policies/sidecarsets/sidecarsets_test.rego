# The SidecarSet policies together: sidecarops evaluates every package under data.sidecarsets,
# and the built-in policies' tests (policies/governance_test.rego) with no review at all.
package sidecarsets_test

_examples := {"blast_radius", "ownership", "privilege", "registries", "resources", "tenancy"}

test_silent_without_a_review if {
	policies := {name | some name; data.sidecarsets[name].deny}
	every name in _examples {
		name in policies
	}
	{[name, action] | some action in ["deny", "warn", "dryrun"]; some name; count(data.sidecarsets[name][action]) > 0} == set()
}
