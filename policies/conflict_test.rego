package sidecarops.conflict_test

import data.sidecarops.conflict
import data.sidecarops.fixtures_test.by_name
import data.sidecarops.fixtures_test.labels_selector
import data.sidecarops.fixtures_test.owners
import data.sidecarops.fixtures_test.sidecarset

_ab := labels_selector({"a": "b"})

_violations(mine, others) := violations if {
	violations := conflict.violations with input as {"sidecarset": mine}
		with data.sidecarops.state.sidecarsets as by_name(others)
		with data.sidecarops.state.owners as owners(others)
}

_container_violation(field, name, other) := {
	"field": field,
	"value": name,
	"message": sprintf("container %s already exist in %s", [name, other]),
	"other": other,
}

_volume_violation(field, name, other) := {
	"field": field,
	"value": name,
	"message": sprintf("volume %s is in conflict with sidecarset %s", [name, other]),
	"other": other,
}

_annotation_violation(field, key, other) := {
	"field": field,
	"value": key,
	"message": sprintf("annotation %s is in conflict with sidecarset %s", [key, other]),
	"other": other,
}

_empty_dir(name) := {"name": name, "emptyDir": {}}

_host_path(name, path) := {"name": name, "hostPath": {"path": path, "type": ""}}

_v21(name) := sidecarset(name, {
	"selector": _ab,
	"containers": ["container-name"],
	"initContainers": ["init-name"],
	"volumes": {"volume-name": _empty_dir("volume-name")},
	"volumeNames": ["volume-name"],
})

# --- compat §4.4 V21-V23 ---------------------------------------------------------------------------

test_v21_same_container_and_init_container_names if {
	_violations(_v21("sidecarset2"), [_v21("sidecarset1")]) == {
		_container_violation("spec.containers[0].name", "container-name", "sidecarset1"),
		_container_violation("spec.initContainers[0].name", "init-name", "sidecarset1"),
	}
}

_nginx_scoped(name) := sidecarset(name, {"selector": _ab, "namespaceSelector": labels_selector({"app": "nginx"}), "containers": ["c"]})

test_v22_same_namespace_selector if {
	_violations(_nginx_scoped("sidecarset2"), [_nginx_scoped("sidecarset1")]) == {_container_violation("spec.containers[0].name", "c", "sidecarset1")}
}

test_v23_disjoint_namespace_selectors if {
	mine := sidecarset("sidecarset2", {"selector": _ab, "namespaceSelector": labels_selector({"app": "nginx"}), "containers": ["c"]})
	other := sidecarset("sidecarset1", {"selector": _ab, "namespaceSelector": labels_selector({"app": "redis"}), "containers": ["c"]})
	_violations(mine, [other]) == set()
}

# --- namespace scopes ----------------------------------------------------------------------------

_in_namespace(name, namespace) := sidecarset(name, {
	"selector": _ab,
	"namespace": namespace,
	"namespaceSelector": labels_selector({"kubernetes.io/metadata.name": namespace}),
	"containers": ["c"],
})

test_namespaced_vs_cluster_scoped_conflict if {
	cluster := sidecarset("cluster", {"selector": _ab, "containers": ["c"]})
	_violations(_in_namespace("scoped", "ns1"), [cluster]) == {_container_violation("spec.containers[0].name", "c", "cluster")}
	_violations(cluster, [_in_namespace("scoped", "ns1")]) == {_container_violation("spec.containers[0].name", "c", "scoped")}
}

test_different_namespaces_do_not_conflict if {
	_violations(_in_namespace("one", "ns1"), [_in_namespace("two", "ns2")]) == set()
}

# Namespace objects are not consulted: a name-scoped set and a label-scoped set may share a namespace.
test_namespace_name_vs_namespace_labels_conflict if {
	labelled := sidecarset("labelled", {"selector": _ab, "namespaceSelector": labels_selector({"env": "prod"}), "containers": ["c"]})
	_violations(_in_namespace("scoped", "ns1"), [labelled]) == {_container_violation("spec.containers[0].name", "c", "labelled")}
}

# --- pod selectors -----------------------------------------------------------------------------------

test_disjoint_pod_selectors_do_not_conflict if {
	mine := sidecarset("mine", {"selector": labels_selector({"a": "h"}), "containers": ["c"]})
	other := sidecarset("other", {"selector": labels_selector({"a": "i"}), "containers": ["c"]})
	_violations(mine, [other]) == set()
}

# decision D2: {a=h} and {b Exists} can share a pod, so they conflict.
test_exists_on_another_key_conflicts if {
	mine := sidecarset("mine", {"selector": labels_selector({"a": "h"}), "containers": ["c"]})
	other := sidecarset("other", {"selector": {"matchLabels": {}, "matchExpressions": [{"key": "b", "operator": "Exists", "values": []}]}, "containers": ["c"]})
	_violations(mine, [other]) == {_container_violation("spec.containers[0].name", "c", "other")}
	_violations(other, [mine]) == {_container_violation("spec.containers[0].name", "c", "mine")}
}

test_unset_or_empty_selector_conflicts_with_nothing if {
	mine := sidecarset("mine", {"selector": _ab, "containers": ["c"]})
	_violations(mine, [sidecarset("unset", {"containers": ["c"]})]) == set()
	_violations(mine, [sidecarset("empty", {"selector": labels_selector({}), "containers": ["c"]})]) == set()
}

# --- names that do not collide -------------------------------------------------------------------------

test_update_is_not_compared_with_itself if {
	_violations(_v21("sidecarset1"), [_v21("sidecarset1")]) == set()
}

test_init_container_and_container_names_not_cross_checked if {
	mine := sidecarset("mine", {"selector": _ab, "initContainers": ["x"]})
	other := sidecarset("other", {"selector": _ab, "containers": ["x"]})
	_violations(mine, [other]) == set()
}

test_field_index_follows_spec_order if {
	mine := sidecarset("mine", {"selector": _ab, "containers": ["a", "b", "shared"]})
	other := sidecarset("other", {"selector": _ab, "containers": ["shared"]})
	_violations(mine, [other]) == {_container_violation("spec.containers[2].name", "shared", "other")}
}

# --- canary and base: decision D3 ---------------------------------------------------------------

test_canary_and_base_never_conflict if {
	base := sidecarset("base", {"selector": _ab, "containers": ["c"]})
	canary := sidecarset("base-canary", {"selector": _ab, "containers": ["c"], "canary": true, "base": "base", "updateType": "NotUpdate"})
	_violations(canary, [base]) == set()
	_violations(base, [canary]) == set()
}

test_canary_conflicts_with_others if {
	canary := sidecarset("base-canary", {"selector": _ab, "containers": ["c"], "canary": true, "base": "base", "updateType": "NotUpdate"})
	third := sidecarset("third", {"selector": _ab, "containers": ["c"]})
	_violations(canary, [third]) == {_container_violation("spec.containers[0].name", "c", "third")}
	_violations(third, [canary]) == {_container_violation("spec.containers[0].name", "c", "base-canary")}
}

# --- volumes: compat §4.4 V36-V38 ------------------------------------------------------------------------

_with_volumes(name, volumes) := sidecarset(name, {
	"selector": _ab,
	"volumes": {v.name: v | some v in volumes},
	"volumeNames": [v.name | some v in volumes],
})

test_v36_different_volume_names if {
	_violations(_with_volumes("mine", [_empty_dir("volume-1")]), [_with_volumes("other", [_empty_dir("volume-2")])]) == set()
}

test_v37_identical_volume if {
	_violations(
		_with_volumes("mine", [_host_path("volume-2", "/home/work")]),
		[_with_volumes("other", [_host_path("volume-2", "/home/work")])],
	) == set()
}

test_v38_same_name_different_definition if {
	mine := _with_volumes("mine", [_empty_dir("volume-1"), _host_path("volume-2", "/home/work-1")])
	_violations(mine, [_with_volumes("other", [_host_path("volume-2", "/home/work-2")])]) == {_volume_violation("spec.volumes[1]", "volume-2", "other")}
}

# Without volumeNames (older normalised documents) the conflict is still reported, less precisely.
test_volume_field_without_volume_names if {
	mine := object.remove(_with_volumes("mine", [_host_path("volume-2", "/home/work-1")]), ["volumeNames"])
	_violations(mine, [_with_volumes("other", [_host_path("volume-2", "/home/work-2")])]) == {_volume_violation("spec.volumes", "volume-2", "other")}
}

# --- patchPodMetadata: compat §4.4 V33-V35 -------------------------------------------------------------------

_patching(name, patches) := sidecarset(name, {"selector": _ab, "patchPodMetadata": patches})

_patch(policy, keys) := {"patchPolicy": policy, "annotations": {key: "{}" | some key in keys}}

test_v33_overwrite_vs_merge_patch if {
	mine := _patching("mine", [_patch("Overwrite", ["key1"])])
	other := _patching("other", [_patch("MergePatchJson", ["key1"])])
	_violations(mine, [other]) == {_annotation_violation("spec.patchPodMetadata[0].annotations[key1]", "key1", "other")}
	_violations(other, [mine]) == {_annotation_violation("spec.patchPodMetadata[0].annotations[key1]", "key1", "mine")}
}

test_v34_retain_vs_overwrite_other_key if {
	_violations(_patching("mine", [_patch("Retain", ["key1"])]), [_patching("other", [_patch("Overwrite", ["key2"])])]) == set()
}

test_v35_merge_patch_vs_merge_patch if {
	_violations(_patching("mine", [_patch("MergePatchJson", ["oom-score"])]), [_patching("other", [_patch("MergePatchJson", ["oom-score"])])]) == set()
}

test_retain_is_ignored_on_both_sides if {
	_violations(_patching("mine", [_patch("Retain", ["key1"])]), [_patching("other", [_patch("Overwrite", ["key1"])])]) == set()
	_violations(_patching("mine", [_patch("Overwrite", ["key1"])]), [_patching("other", [_patch("Retain", ["key1"])])]) == set()
}

test_overwrite_vs_overwrite_names_the_patch if {
	mine := _patching("mine", [_patch("Retain", ["key1"]), _patch("Overwrite", ["key0", "key1"])])
	other := _patching("other", [_patch("Overwrite", ["key1"])])
	_violations(mine, [other]) == {_annotation_violation("spec.patchPodMetadata[1].annotations[key1]", "key1", "other")}
}

# Validation rejects a key set twice (compat §4.4 V13); the policy must still evaluate and say where.
test_key_in_two_of_my_patches if {
	mine := _patching("mine", [_patch("MergePatchJson", ["key1"]), _patch("Overwrite", ["key1"])])
	_violations(mine, [_patching("other", [_patch("MergePatchJson", ["key1"])])]) == {_annotation_violation("spec.patchPodMetadata[1].annotations[key1]", "key1", "other")}
	_violations(mine, [_patching("other", [_patch("Overwrite", ["key1"])])]) == {
		_annotation_violation("spec.patchPodMetadata[0].annotations[key1]", "key1", "other"),
		_annotation_violation("spec.patchPodMetadata[1].annotations[key1]", "key1", "other"),
	}
}
