package findings

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/internal/manifest"
)

// A strict policy with two rules, one of them the rule that is off by default.
var strictRules = []string{"update-strategy-type", "selector-matches-nothing"}

// --enable and --disable: what each rule kind allows, the strict rules by their short names, the
// policies' rules by any name under policy/, and the mistakes named.
func TestEnabled(t *testing.T) {
	rs := NewRuleSet(strictRules)
	for _, tc := range []struct {
		name            string
		enable, disable []string
		want            map[string]bool // the rules whose setting the case is about
		fail            string
	}{
		{name: "nothing given: all on but the off-by-default rule",
			want: map[string]bool{RuleInput: true, RulePod: true, "strict/update-strategy-type": true, RuleSelectorMatchesNothing: false}},
		{name: "the off-by-default rule enabled by its short name", enable: []string{"selector-matches-nothing"},
			want: map[string]bool{RuleSelectorMatchesNothing: true}},
		{name: "a strict rule and a warning rule disabled", disable: []string{" update-strategy-type", RuleKindNotRead},
			want: map[string]bool{"strict/update-strategy-type": false, RuleKindNotRead: false, RuleWebhook: true}},
		{name: "the input rule: its warnings may be silenced", disable: []string{RuleInput}, want: map[string]bool{RuleInput: false}},
		{name: "a policy's rule, known only once it reports", disable: []string{"policy/platform/owner"},
			want: map[string]bool{"policy/platform/owner": false}},
		{name: "what a cluster refuses", disable: []string{RulePod}, fail: "--disable pod: what a cluster refuses cannot be disabled"},
		{name: "no such rule", enable: []string{"nope"}, fail: `--enable "nope": no such rule (the rules: `},
		{name: "policy/ alone names no rule", disable: []string{PolicyPrefix}, fail: `--disable "policy/": no such rule`},
		{name: "both ways", enable: []string{"update-strategy-type"}, disable: []string{"strict/update-strategy-type"},
			fail: "--enable strict/update-strategy-type and --disable strict/update-strategy-type: give one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			on, err := Enabled(rs, tc.enable, tc.disable)
			if tc.fail != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.fail)
				return
			}
			require.NoError(t, err)
			for rule, want := range tc.want {
				assert.Equal(t, want, on[rule], rule)
			}
		})
	}
}

// Known lists every rule and says how a policy's are named; Silenceable leaves out those of what a
// cluster refuses.
func TestRuleLists(t *testing.T) {
	rs := NewRuleSet(strictRules)
	for _, rule := range []string{RuleInput, RulePod, "strict/update-strategy-type", RuleSelectorMatchesNothing} {
		assert.Contains(t, rs.Known(), rule)
	}
	assert.Contains(t, rs.Known(), PolicyPrefix+"RULE (of the --bundle policies)")
	assert.Equal(t, "input, kind-not-read, pod-security, strict/selector-matches-nothing, strict/shadowed-volume, strict/update-strategy-type, webhook, policy/RULE",
		rs.Silenceable(), "sorted, without sidecarset, injection and pod")
}

func annotated(name, disable string) *manifest.Object {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: name}}
	if disable != "" {
		pod.Annotations = map[string]string{DisableAnnotation: disable}
	}
	return &manifest.Object{Position: manifest.Position{Source: name + ".yaml", Doc: 1, Item: -1}, Obj: pod}
}

// The disable annotation silences the rules it names on its object, or on the other object a
// finding is about; it never silences what a cluster refuses, and a name it cannot take is a
// warning at the annotation.
func TestSilenced(t *testing.T) {
	rs := NewRuleSet(strictRules)
	quiet, loud, other := annotated("quiet", "update-strategy-type, pod, nope,"), annotated("loud", ""), annotated("other", RuleShadowedVolume)
	var warned []string
	disabledOn := DisabledOn([]*manifest.Object{quiet, loud, other}, rs, func(rule string, e *manifest.Error) {
		assert.Equal(t, RuleInput, rule)
		assert.Equal(t, "metadata.annotations["+DisableAnnotation+"]", e.Field)
		warned = append(warned, e.Reason)
	})
	assert.Equal(t, []string{"pod: what a cluster refuses cannot be disabled",
		`"nope": no such rule, nothing silenced (the rules: ` + rs.Known() + ")"}, warned)

	enabled, err := Enabled(rs, nil, []string{RuleKindNotRead})
	require.NoError(t, err)
	on := func(o *manifest.Object, rule string) Finding {
		return Finding{Error: o.Report("", "r"), Severity: SeverityWarning, Rule: rule}
	}
	for _, tc := range []struct {
		name string
		f    Finding
		want bool
	}{
		{"named by its object's annotation", on(quiet, "strict/update-strategy-type"), true},
		{"not named there", on(loud, "strict/update-strategy-type"), false},
		{"a rule disabled by flag", on(loud, RuleKindNotRead), true},
		{"the off-by-default rule", on(loud, RuleSelectorMatchesNothing), true},
		{"a policy's rule no flag names", on(loud, "policy/platform/owner"), false},
		{"named by the other object's annotation", Finding{Error: loud.Report("", "r"), Rule: RuleShadowedVolume, Also: other}, true},
		{"a refusal, whatever names its rule", Finding{Error: quiet.Report("", "r"), Rule: "strict/update-strategy-type", Refusal: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.f.Silenced(enabled, disabledOn))
		})
	}
}

func TestPolicyRule(t *testing.T) {
	assert.Equal(t, "strict/max-unavailable", PolicyRule("strict/max-unavailable"))
	assert.Equal(t, "policy/platform/owner", PolicyRule("platform/owner"))
}
