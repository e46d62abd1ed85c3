// Package lint holds the strict findings about SidecarSets: what OpenKruise admits but almost
// certainly is a mistake, such as an updateStrategy.type with a typo, which OpenKruise neither
// refuses nor validates the strategy of, and then rolls out to every pod as a RollingUpdate. They
// are apart from the OpenKruise rules (package validation) on purpose: those decide what a
// cluster admits and must stay OpenKruise's verdicts; these are advice, which `sidecarctl check`
// shows as warnings, or as errors with --strict.
//
// It reads SidecarSets as written, before defaulting: a default (maxUnavailable 1, partition 0)
// is never a mistake of the author's. It never modifies its arguments.
package lint

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/sidecarset/validation"
)

// The rules, as named in check's output.
const (
	// RuleStrategyType: updateStrategy.type is neither RollingUpdate nor NotUpdate.
	RuleStrategyType = "update-strategy-type"
	// RuleUncheckedStrategy: a strategy OpenKruise does not validate (its type is not
	// RollingUpdate) but rolls out nonetheless, held to the RollingUpdate rules.
	RuleUncheckedStrategy = "unchecked-strategy"
	// RuleIgnoredStrategyField: a strategy field that NotUpdate never reads.
	RuleIgnoredStrategyField = "ignored-strategy-field"
	// RuleMaxUnavailable: maxUnavailable over 100%.
	RuleMaxUnavailable = "max-unavailable"
	// RuleSelectorMatchesNothing: spec.selector matches none of the pods given.
	RuleSelectorMatchesNothing = "selector-matches-nothing"
)

// Finding is one strict finding: the field and what is wrong with it, in apimachinery's wording
// where it has one.
type Finding struct {
	Rule    string
	Field   string
	Message string
}

var strategyPath = field.NewPath("spec", "updateStrategy")

// SidecarSet returns the strict findings about the strategy of ss, as written.
func SidecarSet(ss *v1beta1.SidecarSet) []Finding {
	s := &ss.Spec.UpdateStrategy
	var out []Finding
	switch s.Type {
	case "", v1beta1.RollingUpdateSidecarSetStrategyType:
	case v1beta1.NotUpdateSidecarSetStrategyType:
		return ignoredByNotUpdate(s)
	default:
		e := field.NotSupported(strategyPath.Child("type"), s.Type, []string{
			string(v1beta1.NotUpdateSidecarSetStrategyType), string(v1beta1.RollingUpdateSidecarSetStrategyType)})
		out = append(out, Finding{RuleStrategyType, e.Field, e.ErrorBody() +
			": OpenKruise admits it and upgrades pods as with RollingUpdate, without validating the strategy"})
		out = append(out, uncheckedStrategy(s)...)
	}
	if m := s.MaxUnavailable; m != nil && m.Type == intstr.String {
		if pct, err := strconv.Atoi(strings.TrimSuffix(m.StrVal, "%")); err == nil && strings.HasSuffix(m.StrVal, "%") && pct > 100 {
			e := field.Invalid(strategyPath.Child("maxUnavailable"), m.StrVal, "over 100%: every pod may be upgraded at once")
			out = append(out, Finding{RuleMaxUnavailable, e.Field, e.ErrorBody()})
		}
	}
	return out
}

// uncheckedStrategy holds s to OpenKruise's own RollingUpdate rules, which it applies only when the
// type is RollingUpdate, although any type but NotUpdate rolls out (a negative partition, a
// malformed maxUnavailable...). The strategy alone is validated, in an otherwise empty SidecarSet,
// and only what is said about it is kept.
func uncheckedStrategy(s *v1beta1.SidecarSetUpdateStrategy) []Finding {
	probe := &v1beta1.SidecarSet{Spec: v1beta1.SidecarSetSpec{UpdateStrategy: *s.DeepCopy()}}
	probe.Spec.UpdateStrategy.Type = v1beta1.RollingUpdateSidecarSetStrategyType
	var out []Finding
	for _, e := range validation.SidecarSet(probe, nil, nil, nil) {
		if strings.HasPrefix(e.Field, strategyPath.String()+".") && e.Field != strategyPath.Child("type").String() {
			out = append(out, Finding{RuleUncheckedStrategy, e.Field, e.ErrorBody() + " (as RollingUpdate would require)"})
		}
	}
	return out
}

func ignoredByNotUpdate(s *v1beta1.SidecarSetUpdateStrategy) []Finding {
	var out []Finding
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"paused", s.Paused}, {"selector", s.Selector != nil}, {"partition", s.Partition != nil},
		{"maxUnavailable", s.MaxUnavailable != nil}, {"priorityStrategy", s.PriorityStrategy != nil},
		{"scatterStrategy", len(s.ScatterStrategy) > 0},
	} {
		if f.set {
			out = append(out, Finding{RuleIgnoredStrategyField, strategyPath.Child(f.name).String(),
				"ignored: updateStrategy.type NotUpdate never upgrades pods"})
		}
	}
	return out
}

// Selector reports a spec.selector that matches none of pods, which are all the pods the input
// describes: then the SidecarSet is injected nowhere among them, most often because of a typo in a
// label. Only the label selector is read: a namespace scope is about where the pods run, not
// about what they are. An invalid selector is OpenKruise's to refuse; none is said about it here.
func Selector(ss *v1beta1.SidecarSet, pods []*corev1.Pod) []Finding {
	if ss.Spec.Selector == nil || len(pods) == 0 {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ss.Spec.Selector)
	if err != nil {
		return nil
	}
	for _, p := range pods {
		if sel.Matches(labels.Set(p.Labels)) {
			return nil
		}
	}
	return []Finding{{RuleSelectorMatchesNothing, "spec.selector",
		fmt.Sprintf("%s matches none of the %d pod(s) of the input", sel, len(pods))}}
}
