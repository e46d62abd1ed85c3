package workspace

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A template's documents are numbered and placed as in the template: helm separates them with its
// own marker and comment, and ends each with a blank line of its own. A document without a Source
// comment keeps its place in standard input.
func TestStdinAnchors(t *testing.T) {
	in := "---\n# Source: c/templates/a.yaml\nkind: A\nx: 1\n\n---\n# Source: c/templates/b.yaml\nkind: B\n\n---\n# Source: c/templates/a.yaml\nkind: A2\ny: 2\n---\nkind: Plain\n"
	// The template a.yaml is "kind: A\nx: 1\n---\nkind: A2\ny: 2": its line 5 is y.
	a := newStdinAnchors([]byte(in), "")
	for _, tc := range []struct {
		stdinLine int
		want      lineAnchor
	}{
		{1, lineAnchor{"c/templates/a.yaml", 1, 1}}, // the marker: the document's first line
		{4, lineAnchor{"c/templates/a.yaml", 2, 1}},
		{8, lineAnchor{"c/templates/b.yaml", 1, 1}},
		{12, lineAnchor{"c/templates/a.yaml", 4, 2}},
		{13, lineAnchor{"c/templates/a.yaml", 5, 2}},
		{15, lineAnchor{}},
	} {
		assert.Equal(t, tc.want, a.lines[tc.stdinLine-1], "line %d", tc.stdinLine)
	}
}
