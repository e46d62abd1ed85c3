package findings

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/internal/manifest"
)

// The rules of check's findings (docs/cli.md lists them).
const (
	RuleInput       = "input"         // the document cannot be read as written, or is read other than as written
	RuleKindNotRead = "kind-not-read" // documents of kinds sidecarctl does not read, all in one finding
	RuleWebhook     = "webhook"       // the installed pod webhook never sees the workload's pods
	RuleSidecarSet  = "sidecarset"    // OpenKruise's validating webhook refuses the SidecarSet
	RuleInjection   = "injection"     // the injection into the workload's pods fails
	RulePod         = "pod"           // the API server refuses the workload's pods
	RulePodSecurity = "pod-security"  // the sidecars make pods fail the Pod Security level their namespace enforces
	StrictPrefix    = "strict/"       // a strict finding: its rule's name follows
	// PolicyPrefix: a finding of the administrators' SidecarSet policies (--bundle), but the strict
	// policy's: the policy's rule follows.
	PolicyPrefix = "policy/"

	// RuleShadowedVolume: a workload's volume has the name of a volume an injected sidecar mounts,
	// so the sidecar mounts the workload's (decision Q4).
	RuleShadowedVolume = StrictPrefix + "shadowed-volume"
	// RuleSelectorMatchesNothing is the strict policy's rule that is off unless enabled.
	RuleSelectorMatchesNothing = StrictPrefix + "selector-matches-nothing"
)

// DisableAnnotation is the annotation that, on a SidecarSet or a workload, silences the rules it
// lists (comma-separated) on that object.
const DisableAnnotation = "sidecarctl.sidecarops.io/disable"

// ruleKind says what --disable and the annotation may do with a rule's findings. Whatever the
// rule, a finding a cluster refuses (Finding.Refusal) is never silenced.
type ruleKind int

const (
	// silenceable: warnings and strict findings, advice about what a cluster admits.
	silenceable ruleKind = iota
	// refusal: what a cluster refuses. Its findings are never silenced: a CI gate that could be
	// told to pass what the API server refuses would be no gate.
	refusal
	// warningsOnly: a rule of errors a cluster refuses and of warnings; only its warnings are
	// silenced.
	warningsOnly
	// offByDefault: silenceable, and reported only with --enable.
	offByDefault
)

// RuleSet is every rule check knows by name, by kind: its own and the strict policy's. The
// administrators' other policies' rules (policy/RULE) are known only once they report: any such
// name is taken, as silenceable but for the deny findings.
type RuleSet map[string]ruleKind

// NewRuleSet is check's rules with those of the strict policy in force, strictRules (without
// their prefix).
func NewRuleSet(strictRules []string) RuleSet {
	rs := RuleSet{
		RuleInput:          warningsOnly,
		RuleKindNotRead:    silenceable,
		RuleWebhook:        silenceable,
		RuleSidecarSet:     refusal,
		RuleInjection:      refusal,
		RulePod:            refusal,
		RulePodSecurity:    silenceable,
		RuleShadowedVolume: silenceable,
	}
	for _, r := range strictRules {
		rs[StrictPrefix+r] = silenceable
	}
	// Whether a SidecarSet that selects none of the pods given is a mistake depends on whether the
	// input holds every pod it is meant for, which only the user knows: a repository of platform
	// SidecarSets beside one application's Deployment would have it fire for each of them.
	if _, ok := rs[RuleSelectorMatchesNothing]; ok {
		rs[RuleSelectorMatchesNothing] = offByDefault
	}
	return rs
}

// name is given as a rule: the strict rules may be named without their prefix.
func (rs RuleSet) name(given string) (string, bool) {
	given = strings.TrimSpace(given)
	for _, name := range []string{given, StrictPrefix + given} {
		if _, ok := rs[name]; ok {
			return name, true
		}
	}
	if rule, ok := strings.CutPrefix(given, PolicyPrefix); ok && rule != "" {
		return given, true
	}
	return given, false
}

// Known lists every rule, for messages about a name that is none.
func (rs RuleSet) Known() string {
	return strings.Join(append(slices.Sorted(maps.Keys(rs)), PolicyPrefix+"RULE (of the --bundle policies)"), ", ")
}

// Silenceable lists the rules --disable takes.
func (rs RuleSet) Silenceable() string {
	var out []string
	for name, kind := range rs {
		if kind != refusal {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return strings.Join(append(out, PolicyPrefix+"RULE"), ", ")
}

// Enabled says which rules are reported, given the rules of --enable and --disable: false for
// those that are not; a rule it does not name (a policy's) is. Its error, naming what is wrong
// with the flags, is always one of the command line.
func Enabled(rs RuleSet, enable, disable []string) (map[string]bool, error) {
	on := map[string]bool{}
	for name, kind := range rs {
		on[name] = kind != offByDefault
	}
	seen := map[string]string{}
	for _, set := range []struct {
		flag  string
		names []string
		to    bool
	}{{"--enable", enable, true}, {"--disable", disable, false}} {
		for _, given := range set.names {
			name, ok := rs.name(given)
			switch {
			case !ok:
				return nil, fmt.Errorf("%s %q: no such rule (the rules: %s)", set.flag, given, rs.Known())
			case !set.to && rs[name] == refusal:
				return nil, fmt.Errorf("--disable %s: what a cluster refuses cannot be disabled (the rules that can: %s)", name, rs.Silenceable())
			case seen[name] != "" && seen[name] != set.flag:
				return nil, fmt.Errorf("--enable %s and --disable %s: give one", name, name)
			}
			seen[name] = set.flag
			on[name] = set.to
		}
	}
	return on, nil
}

// Silenced reports whether f is left out: a finding a cluster does not refuse, of a rule that is
// not enabled, or that the disable annotation of its object, or of the other object it is about,
// lists.
func (f Finding) Silenced(enabled map[string]bool, disabledOn func(manifest.Position) []string) bool {
	if f.Refusal {
		return false
	}
	if on, ok := enabled[f.Rule]; ok && !on {
		return true
	}
	positions := []manifest.Position{f.Position}
	if f.Also != nil {
		positions = append(positions, f.Also.Position)
	}
	for _, p := range positions {
		if slices.Contains(disabledOn(p), f.Rule) {
			return true
		}
	}
	return false
}

// DisabledOn reads the disable annotation of objects, by position: the rules each silences. A name
// that is no rule, or one of what a cluster refuses, silences nothing and is a warning (rule input)
// at the annotation, given to warn.
func DisabledOn(objects []*manifest.Object, rs RuleSet, warn func(rule string, e *manifest.Error)) func(manifest.Position) []string {
	by := map[manifest.Position][]string{}
	for _, o := range objects {
		m, ok := o.Obj.(metav1.Object)
		if !ok {
			continue
		}
		value, ok := m.GetAnnotations()[DisableAnnotation]
		if !ok {
			continue
		}
		at := "metadata.annotations[" + DisableAnnotation + "]"
		for _, given := range strings.Split(value, ",") {
			if strings.TrimSpace(given) == "" {
				continue
			}
			name, ok := rs.name(given)
			switch {
			case !ok:
				warn(RuleInput, o.Report(at, fmt.Sprintf("%q: no such rule, nothing silenced (the rules: %s)", strings.TrimSpace(given), rs.Known())))
			case rs[name] == refusal:
				warn(RuleInput, o.Report(at, fmt.Sprintf("%s: what a cluster refuses cannot be disabled", name)))
			default:
				by[o.Position] = append(by[o.Position], name)
			}
		}
	}
	return func(p manifest.Position) []string { return by[p] }
}

// PolicyRule names a SidecarSet policy's rule among check's: the strict policy's keep theirs
// (strict/RULE), the others' go under policy/.
func PolicyRule(rule string) string {
	if strings.HasPrefix(rule, StrictPrefix) {
		return rule
	}
	return PolicyPrefix + rule
}
