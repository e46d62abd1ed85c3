package findings

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// The output formats of check (-o).
const (
	Text   = "text"
	JSON   = "json"
	GitHub = "github"
)

// Write prints the findings in format: as text, findings and the summary on errOut (the summary on
// out when there is no error), or as one JSON document or GitHub annotations and the summary on
// out. n says what was checked (Silenced, SidecarSets, Workloads); Write counts the rest and
// returns it whole: the run fails when its Errors are not zero (advice is an error with strict
// already).
func Write(out, errOut io.Writer, format string, strict bool, fs []Finding, n Summary) (Summary, error) {
	for _, f := range fs {
		switch f.Severity {
		case SeverityError:
			n.Errors++
		case SeverityWarning:
			n.Warnings++
		default:
			n.Notices++
		}
	}
	n.Text = summary(fs, n)
	switch format {
	case JSON:
		doc := Report{Schema: Schema, Strict: strict, Findings: []JSONFinding{}, Summary: n}
		for _, f := range fs {
			doc.Findings = append(doc.Findings, newJSONFinding(f))
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return n, enc.Encode(doc)
	case GitHub:
		for _, f := range fs {
			fmt.Fprintln(out, githubAnnotation(f))
		}
		fmt.Fprintln(out, n.Text)
	default:
		for _, f := range fs {
			line := f.Error.Error()
			// As the other commands print check's own: the rule is in -o json and -o github.
			if f.tagged() {
				line += " [" + f.Rule + "]"
			}
			switch f.Severity {
			case SeverityWarning:
				line = "warning: " + line
			case SeverityNotice:
				line = "note: " + line
			}
			fmt.Fprintln(errOut, line)
		}
		if n.Errors == 0 {
			fmt.Fprintln(out, n.Text)
		} else {
			fmt.Fprintln(errOut, n.Text)
		}
	}
	return n, nil
}

// tagged reports whether f's text line names its rule: that of a policy, strict or not, and Pod
// Security's, which the line does not tell from another.
func (f Finding) tagged() bool {
	return strings.HasPrefix(f.Rule, StrictPrefix) || strings.HasPrefix(f.Rule, PolicyPrefix) || f.Rule == RulePodSecurity
}

// summary counts the errors and the SidecarSets they refuse, e.g. "4 error(s) in 2 of 3
// SidecarSet(s); 1 more elsewhere in the input; 2 warning(s); 1 note(s); 1 silenced", or says
// there are none.
func summary(fs []Finding, n Summary) string {
	refused := map[string]bool{}
	inSidecarSets, other := 0, 0
	for _, f := range fs {
		switch {
		case f.Severity != SeverityError:
		case f.Kind == "SidecarSet":
			inSidecarSets++
			refused[f.String()] = true
		default:
			other++
		}
	}
	var s string
	if inSidecarSets+other == 0 {
		s = fmt.Sprintf("%d SidecarSet(s) checked: no errors", n.SidecarSets)
	} else {
		s = fmt.Sprintf("%d error(s) in %d of %d SidecarSet(s)", inSidecarSets, len(refused), n.SidecarSets)
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

// Schema names the version of check's JSON output; a change that breaks a reader of it gets a
// new one.
const Schema = "sidecarctl.check/v1"

// Report is `check -o json`, documented in docs/cli.md.
type Report struct {
	Schema   string        `json:"schema"`
	Strict   bool          `json:"strict"`
	Findings []JSONFinding `json:"findings"`
	Summary  Summary       `json:"summary"`
}

// Summary counts the findings by severity and what was checked; Text says it in a line.
type Summary struct {
	Errors      int    `json:"errors"`
	Warnings    int    `json:"warnings"`
	Notices     int    `json:"notices"`
	Silenced    int    `json:"silenced"`
	SidecarSets int    `json:"sidecarSets"`
	Workloads   int    `json:"workloads"`
	Text        string `json:"text"`
}

// JSONFinding has every key always, zero when unknown: a reader need not test for presence.
type JSONFinding struct {
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

func newJSONFinding(f Finding) JSONFinding {
	j := JSONFinding{File: f.Source, Line: f.Line, Document: f.Doc, Kind: f.Kind, Name: f.Name, Field: f.Field,
		Severity: f.Severity, Message: f.Reason, Rule: f.Rule}
	if f.Doc > 0 && f.Item >= 0 {
		item := f.Item
		j.Item = &item
	}
	return j
}

// githubAnnotation is f as a GitHub Actions workflow command, which the run shows on the line of
// the file: "::error file=F,line=L,title=RULE::MESSAGE" (::warning, ::notice by its severity),
// escaped as the runner expects.
func githubAnnotation(f Finding) string {
	// A finding about no file (the kinds not read) is shown on the run rather than on a file.
	var props []string
	if f.Source != "" {
		props = append(props, "file="+escapeProperty(f.Source))
	}
	if f.Line > 0 {
		props = append(props, fmt.Sprintf("line=%d", f.Line))
	}
	props = append(props, "title="+escapeProperty("sidecarctl "+f.Rule))
	// The message is the line check prints, less the file and line the annotation carries.
	msg := strings.TrimPrefix(f.Error.Error(), f.Source)
	msg = strings.TrimPrefix(msg, fmt.Sprintf(":%d", f.Line))
	msg = strings.TrimPrefix(msg, ": ")
	return fmt.Sprintf("::%s %s::%s", f.Severity, strings.Join(props, ","), escapeData(msg))
}

func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
