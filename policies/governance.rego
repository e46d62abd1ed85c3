# METADATA
# title: SidecarSet governance
# description: |-
#   What the administrators' SidecarSet policies say about a SidecarSet at admission (docs/governing.md).
#
#   Every package under data.sidecarsets is one policy. Its deny, warn and dryrun sets hold findings:
#   a message string, or an object {"msg": <string>, "rule": <string>, "field": <string>} where rule
#   and field may be left out. The set a finding is in is its enforcement action: deny refuses the
#   SidecarSet, warn returns an admission warning, dryrun is only logged and counted; a rule moves
#   from one set to another to change its action. A finding's rule is the package's name under
#   sidecarsets, then "/" and its own rule when it names one.
#
#   Input: {"operation", "userInfo", "sidecarSet", "oldSidecarSet", "impact"}, the table of
#   docs/governing.md.
# scope: package
package sidecarops.governance

_actions := ["deny", "warn", "dryrun"]

findings contains _finding(policy, action, item) if {
	some action in _actions
	some item in data.sidecarsets[policy][action]
}

_finding(policy, action, item) := {"rule": policy, "action": action, "message": item, "field": ""} if is_string(item)

_finding(policy, action, item) := {
	"rule": _rule(policy, item),
	"action": action,
	"message": _message(item),
	"field": _string(item, "field"),
} if is_object(item)

# Anything else is a mistake in the policy: reported as written rather than dropped.
_finding(policy, action, item) := {
	"rule": policy,
	"action": action,
	"message": sprintf("malformed finding (want a string or an object with msg): %v", [item]),
	"field": "",
} if {
	not is_string(item)
	not is_object(item)
}

_rule(policy, item) := concat("/", [policy, item.rule]) if {
	is_string(item.rule)
	item.rule != ""
} else := policy

_message(item) := item.msg if is_string(item.msg)

else := sprintf("malformed finding (want a string msg): %v", [item])

_string(item, key) := item[key] if is_string(item[key])

else := ""
