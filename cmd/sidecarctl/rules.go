package main

import (
	"github.com/spf13/pflag"

	"github.com/sidecarops/sidecarops/internal/sidecarctl/findings"
)

// ruleFlags are --enable and --disable.
type ruleFlags struct {
	enable, disable []string
}

func (f *ruleFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.disable, "disable", nil, "do not report the findings of RULE, a deny finding excepted (a warning, strict, pod-security or policy/RULE rule; the strict rules' names may leave out strict/); repeatable")
	fs.StringArrayVar(&f.enable, "enable", nil, "report the findings of RULE, one that is off by default ("+findings.RuleSelectorMatchesNothing+"); repeatable")
}

// enabled says which rules are reported (findings.Enabled); what is wrong with the flags is a usage
// error.
func (f *ruleFlags) enabled(rs findings.RuleSet) (map[string]bool, error) {
	on, err := findings.Enabled(rs, f.enable, f.disable)
	if err != nil {
		return nil, usageError{err}
	}
	return on, nil
}
