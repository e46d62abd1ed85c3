package check

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/findings"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/installview"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/podcheck"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/workspace"
	"github.com/sidecarops/sidecarops/mutation"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
	"github.com/sidecarops/sidecarops/sidecarset/versions"
)

// Options are what check's flags say beside the input.
type Options struct {
	// strict makes advice errors: the strict findings and the warnings a cluster admits with.
	Strict  bool
	Rules   findings.RuleSet
	Enabled map[string]bool
	// namespace is that of the workloads that name none.
	Namespace string
	View      *installview.View
	Review    *Reviewer
}

// advice is the severity of what a cluster admits but check calls a mistake, or warns about.
func (o Options) advice() string {
	if o.Strict {
		return findings.SeverityError
	}
	return findings.SeverityWarning
}

// Findings is everything check reports about w, in input order and by line within a document:
// what reading found, the SidecarSets refused (and what else is wrong with those that did not
// decode), the workloads whose pods would be refused once injected or fail their namespace's Pod
// Security level, and what the SidecarSet policies say, the strict policy's included. A workload
// view says the installed webhook never sees is validated as written: its pods are created so.
// Only the rules enabled are reported, and silenced says how many findings the flags and
// annotations left out.
func Findings(ctx context.Context, w *workspace.Workspace, opts Options) (out []findings.Finding, silenced int, err error) {
	disabledOn := findings.DisabledOn(slices.Concat(w.Objects, w.Input.Rejected), opts.Rules, w.Warn)
	// check's own errors are all what a cluster refuses.
	add := func(severity, rule string, es ...*manifest.Error) {
		for _, e := range es {
			out = append(out, findings.Finding{Error: e, Severity: severity, Rule: rule, Refusal: severity == findings.SeverityError})
		}
	}
	read := map[*manifest.Error]bool{}
	for _, e := range w.Input.Errors {
		read[e] = true
	}
	out = append(out, w.Warnings...)
	for _, e := range w.Problems {
		switch {
		case read[e] || e.Kind != "SidecarSet":
			add(findings.SeverityError, findings.RuleInput, e)
		default:
			add(findings.SeverityError, findings.RuleSidecarSet, e)
		}
	}

	m := &mutation.Injector{Now: time.Now, Rand: rand.Float64}
	for _, o := range w.Workloads {
		pod, ok := manifest.PodTemplate(o.Obj, opts.Namespace)
		if !ok {
			continue
		}
		written := pod.DeepCopy()
		unseen, err := opts.View.Unseen(ctx, pod.Namespace, pod)
		if err != nil {
			return nil, 0, err
		}
		if unseen != "" {
			add(findings.SeverityError, findings.RulePod, podcheck.Problems(w, o, written, written, nil)...)
			continue
		}
		res, err := injector.Pod(ctx, w.Snapshot, m, injector.PodRequest{Pod: pod})
		if err != nil {
			add(findings.SeverityError, findings.RuleInjection, o.Report("", err.Error()))
			continue
		}
		add(findings.SeverityError, findings.RulePod, podcheck.Problems(w, o, written, res.Pod, res.Injected)...)
		for _, s := range podcheck.ShadowedVolumes(w, o, written, res.Injected) {
			s.Severity = opts.advice()
			out = append(out, s)
		}
		enforced, err := opts.View.Enforced(ctx, pod.Namespace)
		if err != nil {
			return nil, 0, err
		}
		if f := podcheck.PodSecurity(w, enforced, written, res); f != nil {
			out = append(out, findings.Finding{Error: o.Report("", f.String()), Severity: opts.advice(), Rule: findings.RulePodSecurity})
		}
	}
	// What did not decode is refused already; what did is checked on, so that one run reports
	// every problem. A rejected SidecarSet is validated beside the admitted ones: it is never
	// admitted, so they are all that a cluster would hold beside it.
	for _, o := range w.Input.Rejected {
		switch {
		case isSidecarSet(o):
			errs, err := validateRejected(ctx, w, o)
			if err != nil {
				return nil, 0, err
			}
			add(findings.SeverityError, findings.RuleSidecarSet, errs...)
		case manifest.IsWorkload(o.Obj):
			if pod, ok := manifest.PodTemplate(o.Obj, opts.Namespace); ok {
				add(findings.SeverityError, findings.RulePod, podcheck.Problems(w, o, pod, pod, nil)...)
			}
		}
	}
	governed, err := governance(ctx, w, opts.Review, opts.advice())
	if err != nil {
		return nil, 0, err
	}
	out = append(out, governed...)
	out = slices.DeleteFunc(out, func(f findings.Finding) bool {
		if f.Silenced(opts.Enabled, disabledOn) {
			silenced++
			return true
		}
		return false
	})
	findings.Sort(out, w.Input.Sources)
	for i := range out {
		out[i].Error = w.Anchor(out[i].Error)
	}
	return out, silenced, nil
}

func isSidecarSet(o *manifest.Object) bool {
	switch o.Obj.(type) {
	case *v1alpha1.SidecarSet, *v1beta1.SidecarSet:
		return true
	}
	return false
}

// validateRejected validates a SidecarSet that did not decode whole, as load validates the others,
// but what is left of it: what it says about values that did not decode is left out (reported).
func validateRejected(ctx context.Context, w *workspace.Workspace, o *manifest.Object) (manifest.Errors, error) {
	written, err := versions.Of(o.Obj)
	if err != nil {
		return nil, nil
	}
	ss := written.Hub
	ss.Namespace = ""
	if err := defaults.SidecarSetAndHash(ss); err != nil {
		return nil, nil //nolint:nilerr // a hash that cannot be computed adds nothing to the errors reported
	}
	errs, err := workspace.ValidateSidecarSet(ctx, w.Snapshot, ss)
	if err != nil {
		return nil, err
	}
	var out manifest.Errors
	for _, e := range written.Errors(errs) {
		if !o.Dropped(e.Field) {
			out = append(out, o.Report(e.Field, e.ErrorBody()))
		}
	}
	return out, nil
}
