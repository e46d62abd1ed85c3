package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/internal/manifest"
)

// The rules of check's findings (docs/cli.md lists them).
const (
	ruleInput       = "input"         // the document cannot be read as written, or is read other than as written
	ruleKindNotRead = "kind-not-read" // documents of kinds sidecarctl does not read, all in one finding
	ruleWebhook     = "webhook"       // the installed pod webhook never sees the workload's pods
	ruleSidecarSet  = "sidecarset"    // OpenKruise's validating webhook refuses the SidecarSet
	ruleInjection   = "injection"     // the injection into the workload's pods fails
	rulePod         = "pod"           // the API server refuses the workload's pods
	rulePodSecurity = "pod-security"  // the sidecars make pods fail the Pod Security level their namespace enforces
	strictPrefix    = "strict/"       // a strict finding: its rule's name follows
	// policyPrefix: a finding of the administrators' SidecarSet policies (--bundle), but the strict
	// policy's: the policy's rule follows.
	policyPrefix = "policy/"

	// ruleShadowedVolume: a workload's volume has the name of a volume an injected sidecar mounts,
	// so the sidecar mounts the workload's (decision Q4).
	ruleShadowedVolume = strictPrefix + "shadowed-volume"
	// ruleSelectorMatchesNothing is the strict policy's rule that is off unless enabled.
	ruleSelectorMatchesNothing = strictPrefix + "selector-matches-nothing"
)

// disableAnnotation, on a SidecarSet or a workload, silences the rules it lists (comma-separated)
// on that object.
const disableAnnotation = "sidecarctl.sidecarops.io/disable"

// ruleKind says what --disable and the annotation may do with a rule's findings. Whatever the
// rule, a finding a cluster refuses (finding.refusal) is never silenced.
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

// ruleSet is every rule check knows by name, by kind: its own and the strict policy's. The
// administrators' other policies' rules (policy/RULE) are known only once they report: any such
// name is taken, as silenceable but for the deny findings.
type ruleSet map[string]ruleKind

// newRuleSet is check's rules with those of the strict policy in force, strictRules (without
// their prefix).
func newRuleSet(strictRules []string) ruleSet {
	rs := ruleSet{
		ruleInput:          warningsOnly,
		ruleKindNotRead:    silenceable,
		ruleWebhook:        silenceable,
		ruleSidecarSet:     refusal,
		ruleInjection:      refusal,
		rulePod:            refusal,
		rulePodSecurity:    silenceable,
		ruleShadowedVolume: silenceable,
	}
	for _, r := range strictRules {
		rs[strictPrefix+r] = silenceable
	}
	// Whether a SidecarSet that selects none of the pods given is a mistake depends on whether the
	// input holds every pod it is meant for, which only the user knows: a repository of platform
	// SidecarSets beside one application's Deployment would have it fire for each of them.
	if _, ok := rs[ruleSelectorMatchesNothing]; ok {
		rs[ruleSelectorMatchesNothing] = offByDefault
	}
	return rs
}

// name is given as a rule: the strict rules may be named without their prefix.
func (rs ruleSet) name(given string) (string, bool) {
	given = strings.TrimSpace(given)
	for _, name := range []string{given, strictPrefix + given} {
		if _, ok := rs[name]; ok {
			return name, true
		}
	}
	if rule, ok := strings.CutPrefix(given, policyPrefix); ok && rule != "" {
		return given, true
	}
	return given, false
}

func (rs ruleSet) known() string {
	return strings.Join(append(slices.Sorted(maps.Keys(rs)), policyPrefix+"RULE (of the --bundle policies)"), ", ")
}

// ruleFlags are --enable and --disable.
type ruleFlags struct {
	enable, disable []string
}

func (f *ruleFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.disable, "disable", nil, "do not report the findings of RULE, a deny finding excepted (a warning, strict, pod-security or policy/RULE rule; the strict rules' names may leave out strict/); repeatable")
	fs.StringArrayVar(&f.enable, "enable", nil, "report the findings of RULE, one that is off by default ("+ruleSelectorMatchesNothing+"); repeatable")
}

// enabled says which rules are reported: false for those that are not; a rule it does not name
// (a policy's) is. A usage error names what is wrong with the flags.
func (f *ruleFlags) enabled(rs ruleSet) (map[string]bool, error) {
	on := map[string]bool{}
	for name, kind := range rs {
		on[name] = kind != offByDefault
	}
	seen := map[string]string{}
	for _, set := range []struct {
		flag  string
		names []string
		to    bool
	}{{"--enable", f.enable, true}, {"--disable", f.disable, false}} {
		for _, given := range set.names {
			name, ok := rs.name(given)
			switch {
			case !ok:
				return nil, usageError{fmt.Errorf("%s %q: no such rule (the rules: %s)", set.flag, given, rs.known())}
			case !set.to && rs[name] == refusal:
				return nil, usageError{fmt.Errorf("--disable %s: what a cluster refuses cannot be disabled (the rules that can: %s)", name, rs.silenceable())}
			case seen[name] != "" && seen[name] != set.flag:
				return nil, usageError{fmt.Errorf("--enable %s and --disable %s: give one", name, name)}
			}
			seen[name] = set.flag
			on[name] = set.to
		}
	}
	return on, nil
}

func (rs ruleSet) silenceable() string {
	var out []string
	for name, kind := range rs {
		if kind != refusal {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return strings.Join(append(out, policyPrefix+"RULE"), ", ")
}

// silenced reports whether f is left out: a finding a cluster does not refuse, of a rule that is
// not enabled, or that the disable annotation of its object, or of the other object it is about,
// lists.
func (f finding) silenced(enabled map[string]bool, disabledOn func(manifest.Position) []string) bool {
	if f.refusal {
		return false
	}
	if on, ok := enabled[f.rule]; ok && !on {
		return true
	}
	positions := []manifest.Position{f.Position}
	if f.also != nil {
		positions = append(positions, f.also.Position)
	}
	for _, p := range positions {
		if slices.Contains(disabledOn(p), f.rule) {
			return true
		}
	}
	return false
}

// disabledOn reads the disable annotation of every object of the input, the rejected ones
// included, by position: the rules each silences. A name that is no rule, or one of what a cluster
// refuses, silences nothing and is a warning at the annotation.
func (w *workspace) disabledOn(rs ruleSet) func(manifest.Position) []string {
	by := map[manifest.Position][]string{}
	for _, o := range slices.Concat(w.objects, w.input.Rejected) {
		m, ok := o.Obj.(metav1.Object)
		if !ok {
			continue
		}
		value, ok := m.GetAnnotations()[disableAnnotation]
		if !ok {
			continue
		}
		at := "metadata.annotations[" + disableAnnotation + "]"
		for _, given := range strings.Split(value, ",") {
			if strings.TrimSpace(given) == "" {
				continue
			}
			name, ok := rs.name(given)
			switch {
			case !ok:
				w.warn(ruleInput, o.Report(at, fmt.Sprintf("%q: no such rule, nothing silenced (the rules: %s)", strings.TrimSpace(given), rs.known())))
			case rs[name] == refusal:
				w.warn(ruleInput, o.Report(at, fmt.Sprintf("%s: what a cluster refuses cannot be disabled", name)))
			default:
				by[o.Position] = append(by[o.Position], name)
			}
		}
	}
	return func(p manifest.Position) []string { return by[p] }
}
