package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarset/lint"
)

// The rules of check's findings (docs/cli.md lists them).
const (
	ruleInput       = "input"         // the document cannot be read as written, or is read other than as written
	ruleKindNotRead = "kind-not-read" // documents of kinds sidecarctl does not read, all in one finding
	ruleWebhook     = "webhook"       // the installed pod webhook never sees the workload's pods
	ruleSidecarSet  = "sidecarset"    // OpenKruise's validating webhook refuses the SidecarSet
	ruleInjection   = "injection"     // the injection into the workload's pods fails
	rulePod         = "pod"           // the API server refuses the workload's pods
	strictPrefix    = "strict/"       // a strict finding: its rule's name follows

	// ruleShadowedVolume: a workload's volume has the name of a volume an injected sidecar mounts,
	// so the sidecar mounts the workload's (decision Q4).
	ruleShadowedVolume = strictPrefix + "shadowed-volume"
)

// disableAnnotation, on a SidecarSet or a workload, silences the rules it lists (comma-separated)
// on that object.
const disableAnnotation = "sidecarctl.sidecarops.io/disable"

// ruleKind says what --disable and the annotation may do with a rule's findings.
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

var rules = map[string]ruleKind{
	ruleInput:       warningsOnly,
	ruleKindNotRead: silenceable,
	ruleWebhook:     silenceable,
	ruleSidecarSet:  refusal,
	ruleInjection:   refusal,
	rulePod:         refusal,

	strictPrefix + lint.RuleStrategyType:         silenceable,
	strictPrefix + lint.RuleUncheckedStrategy:    silenceable,
	strictPrefix + lint.RuleIgnoredStrategyField: silenceable,
	strictPrefix + lint.RuleMaxUnavailable:       silenceable,
	// Whether a SidecarSet that selects none of the pods given is a mistake depends on whether the
	// input holds every pod it is meant for, which only the user knows: a repository of platform
	// SidecarSets beside one application's Deployment would have it fire for each of them.
	strictPrefix + lint.RuleSelectorMatchesNothing: offByDefault,
	ruleShadowedVolume: silenceable,
}

// ruleName is name as a rule: the strict rules may be named without their prefix.
func ruleName(name string) (string, bool) {
	name = strings.TrimSpace(name)
	if _, ok := rules[name]; ok {
		return name, true
	}
	if _, ok := rules[strictPrefix+name]; ok {
		return strictPrefix + name, true
	}
	return name, false
}

func knownRules() string {
	return strings.Join(slices.Sorted(maps.Keys(rules)), ", ")
}

// ruleFlags are --enable and --disable.
type ruleFlags struct {
	enable, disable []string
}

func (f *ruleFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.disable, "disable", nil, "do not report the findings of RULE (a warning or strict rule; the strict rules' names may leave out strict/); repeatable")
	fs.StringArrayVar(&f.enable, "enable", nil, "report the findings of RULE, one that is off by default (strict/selector-matches-nothing); repeatable")
}

// enabled is the set of rules reported, or a usage error naming what is wrong.
func (f *ruleFlags) enabled() (map[string]bool, error) {
	on := map[string]bool{}
	for name, kind := range rules {
		on[name] = kind != offByDefault
	}
	seen := map[string]string{}
	for _, set := range []struct {
		flag  string
		names []string
		to    bool
	}{{"--enable", f.enable, true}, {"--disable", f.disable, false}} {
		for _, given := range set.names {
			name, ok := ruleName(given)
			switch {
			case !ok:
				return nil, usageError{fmt.Errorf("%s %q: no such rule (the rules: %s)", set.flag, given, knownRules())}
			case !set.to && rules[name] == refusal:
				return nil, usageError{fmt.Errorf("--disable %s: what a cluster refuses cannot be disabled (the rules that can: %s)", name, silenceableRules())}
			case seen[name] != "" && seen[name] != set.flag:
				return nil, usageError{fmt.Errorf("--enable %s and --disable %s: give one", name, name)}
			}
			seen[name] = set.flag
			on[name] = set.to
		}
	}
	return on, nil
}

func silenceableRules() string {
	var out []string
	for name, kind := range rules {
		if kind != refusal {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// silenced reports whether f is left out: a warning or strict finding of a rule that is not
// enabled, or that the disable annotation of its object, or of the other object it is about, lists.
func (f finding) silenced(enabled map[string]bool, disabledOn func(manifest.Position) []string) bool {
	if f.severity == severityError && !strings.HasPrefix(f.rule, strictPrefix) {
		return false
	}
	if !enabled[f.rule] {
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
func (w *workspace) disabledOn() func(manifest.Position) []string {
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
			name, ok := ruleName(given)
			switch {
			case !ok:
				w.warn(ruleInput, o.Report(at, fmt.Sprintf("%q: no such rule, nothing silenced (the rules: %s)", strings.TrimSpace(given), knownRules())))
			case rules[name] == refusal:
				w.warn(ruleInput, o.Report(at, fmt.Sprintf("%s: what a cluster refuses cannot be disabled", name)))
			default:
				by[o.Position] = append(by[o.Position], name)
			}
		}
	}
	return func(p manifest.Position) []string { return by[p] }
}
