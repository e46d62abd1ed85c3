package workspace

import (
	"bytes"
	"regexp"

	"github.com/sidecarops/sidecarops/internal/manifest"
)

// stdinAnchors place what is found in standard input in the files it came from, so that a CI run
// over `helm template … | sidecarctl check -f -` annotates the chart's templates rather than
// "<stdin>". helm writes "# Source: CHART/templates/FILE" at the top of each document it renders: a
// document with that comment is anchored to FILE, at the line of the template that renders line for
// line (a template whose directives add or remove lines above a field shifts it), and numbered among
// the documents of FILE. Any other document is anchored to --stdin-filename when it is given.
type stdinAnchors struct {
	name  string       // --stdin-filename, or "" for manifest.StdinSource
	lines []lineAnchor // by line of standard input, from 0; source "" where no comment says
}

type lineAnchor struct {
	source    string
	line, doc int
}

var helmSource = regexp.MustCompile(`^# Source: (\S.*?)\s*$`)

// newStdinAnchors reads the Source comments of data, standard input. A document of YAML begins at
// a "---" line (as the reader cuts documents); its Source comment is the first comment before its
// content.
func newStdinAnchors(data []byte, name string) *stdinAnchors {
	a := &stdinAnchors{name: name}
	lines := bytes.SplitAfter(data, []byte("\n"))
	a.lines = make([]lineAnchor, len(lines))
	docs := map[string]int{} // documents anchored to each source so far
	next := map[string]int{} // the line of each source that the previous document ended on
	start := 0
	for i := 0; i <= len(lines); i++ {
		if i < len(lines) && (i == start || !documentStart(lines[i])) {
			continue
		}
		a.document(lines, start, i, docs, next)
		start = i
	}
	return a
}

// document anchors lines[from:to], one document, when it has a Source comment before its content.
func (a *stdinAnchors) document(lines [][]byte, from, to int, docs, next map[string]int) {
	for c := from; c < to; c++ {
		text := bytes.TrimSpace(lines[c])
		if c == from && documentStart(lines[c]) {
			continue
		}
		m := helmSource.FindSubmatch(text)
		switch {
		case m != nil:
			source := string(m[1])
			docs[source]++
			// The template's documents are separated by a "---" line of their own, which helm
			// replaces with its own marker and comment.
			offset := next[source]
			if docs[source] > 1 {
				offset++
			}
			for i := from; i < to; i++ {
				a.lines[i] = lineAnchor{source: source, line: offset + max(1, i-c), doc: docs[source]}
			}
			// helm ends each document with a blank line of its own.
			last := to - 1
			for last > c && len(bytes.TrimSpace(lines[last])) == 0 {
				last--
			}
			next[source] = offset + last - c
			return
		case len(text) > 0 && text[0] != '#':
			return // content before any Source comment
		}
	}
}

// documentStart reports whether line is a "---" marker, as YAML and the reader of -f take it.
func documentStart(line []byte) bool {
	line = bytes.TrimRight(line, "\r\n")
	return bytes.HasPrefix(line, []byte("---")) && (len(line) == 3 || line[3] == ' ' || line[3] == '\t')
}

// anchor is e placed where standard input's content came from; e itself when it is not about
// standard input or no anchor changes it.
func (a *stdinAnchors) anchor(e *manifest.Error) *manifest.Error {
	if a == nil || e.Source != manifest.StdinSource {
		return e
	}
	c := *e
	if a.name != "" {
		c.Source = a.name
	}
	if e.Line > 0 && e.Line <= len(a.lines) {
		if l := a.lines[e.Line-1]; l.source != "" {
			c.Source, c.Line, c.Doc = l.source, l.line, l.doc
		}
	}
	return &c
}
