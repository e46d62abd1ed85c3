package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarset/defaults"
	"github.com/sidecarops/sidecarops/internal/sidecarset/versions"
	"github.com/sidecarops/sidecarops/mutation"
)

// The severities of check's findings (docs/cli.md documents them, and the rules in rules.go).
const (
	severityError   = "error"
	severityWarning = "warning"
	// severityNotice: said, never failing the run, --strict or not (a policy's dryrun finding).
	severityNotice = "notice"
)

// finding is one problem check reports. also is the other object it is about, if any, whose
// disable annotation silences it as its own object's does. refusal marks what a cluster refuses,
// which nothing silences.
type finding struct {
	*manifest.Error
	severity string
	rule     string
	also     *manifest.Object
	refusal  bool
}

// checkOptions are what check's flags say beside the input.
type checkOptions struct {
	// strict makes advice errors: the strict findings and the warnings a cluster admits with.
	strict  bool
	rules   ruleSet
	enabled map[string]bool
	// namespace is that of the workloads that name none.
	namespace string
	view      *podWebhookView
	review    *reviewer
}

// advice is the severity of what a cluster admits but check calls a mistake, or warns about.
func (o checkOptions) advice() string {
	if o.strict {
		return severityError
	}
	return severityWarning
}

// findings is everything check reports about w, in input order and by line within a document:
// what reading found, the SidecarSets refused (and what else is wrong with those that did not
// decode), the workloads whose pods would be refused once injected or fail their namespace's Pod
// Security level, and what the SidecarSet policies say, the strict policy's included. A workload
// view says the installed webhook never sees is validated as written: its pods are created so.
// Only the rules enabled are reported, and silenced says how many findings the flags and
// annotations left out.
func (w *workspace) findings(ctx context.Context, opts checkOptions) (out []finding, silenced int, err error) {
	disabledOn := w.disabledOn(opts.rules)
	// check's own errors are all what a cluster refuses.
	add := func(severity, rule string, es ...*manifest.Error) {
		for _, e := range es {
			out = append(out, finding{Error: e, severity: severity, rule: rule, refusal: severity == severityError})
		}
	}
	read := map[*manifest.Error]bool{}
	for _, e := range w.input.Errors {
		read[e] = true
	}
	out = append(out, w.warnings...)
	for _, e := range w.problems {
		switch {
		case read[e] || e.Kind != "SidecarSet":
			add(severityError, ruleInput, e)
		default:
			add(severityError, ruleSidecarSet, e)
		}
	}

	m := &mutation.Injector{Now: time.Now, Rand: rand.Float64}
	for _, o := range w.workloads {
		pod, ok := manifest.PodTemplate(o.Obj, opts.namespace)
		if !ok {
			continue
		}
		written := pod.DeepCopy()
		unseen, err := opts.view.unseen(ctx, pod.Namespace, pod)
		if err != nil {
			return nil, 0, err
		}
		if unseen != "" {
			add(severityError, rulePod, w.podProblems(o, written, written, nil)...)
			continue
		}
		res, err := injector.Pod(ctx, w.snapshot, m, injector.PodRequest{Pod: pod})
		if err != nil {
			add(severityError, ruleInjection, o.Report("", err.Error()))
			continue
		}
		add(severityError, rulePod, w.podProblems(o, written, res.Pod, res.Injected)...)
		for _, s := range w.shadowedVolumes(o, written, res.Injected) {
			s.severity = opts.advice()
			out = append(out, s)
		}
		enforced, err := opts.view.enforced(ctx, pod.Namespace)
		if err != nil {
			return nil, 0, err
		}
		if f := w.podSecurity(enforced, written, res); f != nil {
			out = append(out, finding{Error: o.Report("", f.String()), severity: opts.advice(), rule: rulePodSecurity})
		}
	}
	// What did not decode is refused already; what did is checked on, so that one run reports
	// every problem. A rejected SidecarSet is validated beside the admitted ones: it is never
	// admitted, so they are all that a cluster would hold beside it.
	for _, o := range w.input.Rejected {
		switch {
		case isSidecarSet(o):
			errs, err := w.validateRejected(ctx, o)
			if err != nil {
				return nil, 0, err
			}
			add(severityError, ruleSidecarSet, errs...)
		case manifest.IsWorkload(o.Obj):
			if pod, ok := manifest.PodTemplate(o.Obj, opts.namespace); ok {
				add(severityError, rulePod, w.podProblems(o, pod, pod, nil)...)
			}
		}
	}
	governed, err := w.governance(ctx, opts.review, opts.advice())
	if err != nil {
		return nil, 0, err
	}
	out = append(out, governed...)
	out = slices.DeleteFunc(out, func(f finding) bool {
		if f.silenced(opts.enabled, disabledOn) {
			silenced++
			return true
		}
		return false
	})
	w.sortFindings(out)
	for i := range out {
		out[i].Error = w.anchors.anchor(out[i].Error)
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
func (w *workspace) validateRejected(ctx context.Context, o *manifest.Object) (manifest.Errors, error) {
	written, err := versions.Of(o.Obj)
	if err != nil {
		return nil, nil
	}
	ss := written.Hub
	ss.Namespace = ""
	if err := defaults.SidecarSetAndHash(ss); err != nil {
		return nil, nil //nolint:nilerr // a hash that cannot be computed adds nothing to the errors reported
	}
	errs, err := validateSidecarSet(ctx, w.snapshot, ss)
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

// sortFindings puts the findings in input order — by source as read, document, List item — each
// document's in the order they were found: what reading found (by line), then OpenKruise's rules
// in OpenKruise's order, the pods, the SidecarSet policies' findings by line.
func (w *workspace) sortFindings(fs []finding) {
	rank := map[string]int{}
	note := func(source string) {
		if _, ok := rank[source]; !ok {
			rank[source] = len(rank)
		}
	}
	for _, s := range w.input.Sources {
		note(s)
	}
	for _, f := range fs {
		note(f.Source)
	}
	slices.SortStableFunc(fs, func(a, b finding) int {
		return cmp.Or(cmp.Compare(rank[a.Source], rank[b.Source]), cmp.Compare(a.Doc, b.Doc),
			cmp.Compare(a.Item, b.Item))
	})
}

// report prints the findings as output says and ends check: with exit status 1 when any is an
// error (advice is one with --strict already). silenced counts those left out.
func (w *workspace) report(cmd *cobra.Command, fs []finding, silenced int, output string, strict bool) error {
	var n checkSummary
	for _, f := range fs {
		switch f.severity {
		case severityError:
			n.Errors++
		case severityWarning:
			n.Warnings++
		default:
			n.Notices++
		}
	}
	n.Silenced, n.SidecarSets, n.Workloads = silenced, w.sidecarSetsGiven, len(w.workloads)
	n.Text = w.summary(fs, n)
	out := cmd.OutOrStdout()
	switch output {
	case "json":
		doc := checkReport{Schema: checkSchema, Strict: strict, Findings: []jsonFinding{}, Summary: n}
		for _, f := range fs {
			doc.Findings = append(doc.Findings, newJSONFinding(f))
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			return err
		}
	case "github":
		for _, f := range fs {
			fmt.Fprintln(out, githubAnnotation(f))
		}
		fmt.Fprintln(out, n.Text)
	default:
		for _, f := range fs {
			line := f.Error.Error()
			// As the other commands print check's own: the rule is in -o json and -o github.
			if f.tagged() {
				line += " [" + f.rule + "]"
			}
			switch f.severity {
			case severityWarning:
				line = "warning: " + line
			case severityNotice:
				line = "note: " + line
			}
			fmt.Fprintln(cmd.ErrOrStderr(), line)
		}
		if n.Errors == 0 {
			fmt.Fprintln(out, n.Text)
			return nil
		}
		fmt.Fprintln(cmd.ErrOrStderr(), n.Text)
	}
	if n.Errors > 0 {
		return exitStatus(1)
	}
	return nil
}

// tagged reports whether f's text line names its rule: that of a policy, strict or not, and Pod
// Security's, which the line does not tell from another.
func (f finding) tagged() bool {
	return strings.HasPrefix(f.rule, strictPrefix) || strings.HasPrefix(f.rule, policyPrefix) || f.rule == rulePodSecurity
}

// summary counts the errors and the SidecarSets they refuse, e.g. "4 error(s) in 2 of 3
// SidecarSet(s); 1 more elsewhere in the input; 2 warning(s); 1 note(s); 1 silenced", or says
// there are none.
func (w *workspace) summary(fs []finding, n checkSummary) string {
	refused := map[string]bool{}
	inSidecarSets, other := 0, 0
	for _, f := range fs {
		switch {
		case f.severity != severityError:
		case f.Kind == "SidecarSet":
			inSidecarSets++
			refused[f.String()] = true
		default:
			other++
		}
	}
	var s string
	if inSidecarSets+other == 0 {
		s = fmt.Sprintf("%d SidecarSet(s) checked: no errors", w.sidecarSetsGiven)
	} else {
		s = fmt.Sprintf("%d error(s) in %d of %d SidecarSet(s)", inSidecarSets, len(refused), w.sidecarSetsGiven)
		if other > 0 {
			s += fmt.Sprintf("; %d more elsewhere in the input", other)
		}
	}
	for _, c := range []struct {
		count int
		what  string
	}{{n.Warnings, "warning(s)"}, {n.Notices, "note(s)"}, {n.Silenced, "silenced"}} {
		if c.count > 0 {
			s += fmt.Sprintf("; %d %s", c.count, c.what)
		}
	}
	return s
}

// checkSchema names the version of check's JSON output; a change that breaks a reader of it gets
// a new one.
const checkSchema = "sidecarctl.check/v1"

// checkReport is `check -o json`, documented in docs/cli.md.
type checkReport struct {
	Schema   string        `json:"schema"`
	Strict   bool          `json:"strict"`
	Findings []jsonFinding `json:"findings"`
	Summary  checkSummary  `json:"summary"`
}

type checkSummary struct {
	Errors      int    `json:"errors"`
	Warnings    int    `json:"warnings"`
	Notices     int    `json:"notices"`
	Silenced    int    `json:"silenced"`
	SidecarSets int    `json:"sidecarSets"`
	Workloads   int    `json:"workloads"`
	Text        string `json:"text"`
}

// jsonFinding has every key always, zero when unknown: a reader need not test for presence.
type jsonFinding struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Document int    `json:"document"`
	Item     *int   `json:"item"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Field    string `json:"field"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
	Rule     string `json:"rule"`
}

func newJSONFinding(f finding) jsonFinding {
	j := jsonFinding{File: f.Source, Line: f.Line, Document: f.Doc, Kind: f.Kind, Name: f.Name, Field: f.Field,
		Severity: f.severity, Message: f.Reason, Rule: f.rule}
	if f.Doc > 0 && f.Item >= 0 {
		item := f.Item
		j.Item = &item
	}
	return j
}

// githubAnnotation is f as a GitHub Actions workflow command, which the run shows on the line of
// the file: "::error file=F,line=L,title=RULE::MESSAGE" (::warning, ::notice by its severity),
// escaped as the runner expects.
func githubAnnotation(f finding) string {
	// A finding about no file (the kinds not read) is shown on the run rather than on a file.
	var props []string
	if f.Source != "" {
		props = append(props, "file="+escapeProperty(f.Source))
	}
	if f.Line > 0 {
		props = append(props, fmt.Sprintf("line=%d", f.Line))
	}
	props = append(props, "title="+escapeProperty("sidecarctl "+f.rule))
	// The message is the line check prints, less the file and line the annotation carries.
	msg := strings.TrimPrefix(f.Error.Error(), f.Source)
	msg = strings.TrimPrefix(msg, fmt.Sprintf(":%d", f.Line))
	msg = strings.TrimPrefix(msg, ": ")
	return fmt.Sprintf("::%s %s::%s", f.severity, strings.Join(props, ","), escapeData(msg))
}

func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
