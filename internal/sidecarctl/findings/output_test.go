package findings

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/internal/manifest"
)

func at(source string, doc, item, line int, kind, name, field, reason string) *manifest.Error {
	return &manifest.Error{Position: manifest.Position{Source: source, Doc: doc, Item: item}, Kind: kind, Name: name,
		Line: line, Field: field, Reason: reason}
}

// Findings read down the input: sources in the order read, then documents and List items; within
// a document, in the order found.
func TestSort(t *testing.T) {
	fs := []Finding{
		{Error: at("b.yaml", 1, -1, 3, "Pod", "b", "", "first found in b")},
		{Error: at("a.yaml", 2, -1, 9, "Pod", "a2", "", "a's second document")},
		{Error: at("", 0, -1, 0, "", "", "", "about no file")},
		{Error: at("a.yaml", 1, 1, 5, "Pod", "a1", "", "item 1")},
		{Error: at("a.yaml", 1, 0, 7, "Pod", "a0", "", "item 0, found first")},
		{Error: at("a.yaml", 1, 0, 2, "Pod", "a0", "", "item 0, found second")},
		{Error: at("b.yaml", 1, -1, 1, "Pod", "b", "", "second found in b")},
	}
	Sort(fs, []string{"a.yaml", "b.yaml"})
	var got []string
	for _, f := range fs {
		got = append(got, f.Reason)
	}
	assert.Equal(t, []string{"item 0, found first", "item 0, found second", "item 1", "a's second document",
		"first found in b", "second found in b", "about no file"}, got)
}

func TestWrite(t *testing.T) {
	fs := []Finding{
		{Error: at("ss.yaml", 1, -1, 4, "SidecarSet", "mesh", "spec.x", "refused"), Severity: SeverityError, Rule: RuleSidecarSet},
		{Error: at("ss.yaml", 1, -1, 6, "SidecarSet", "mesh", "spec.y", "also refused"), Severity: SeverityError, Rule: RuleSidecarSet},
		{Error: at("a,b:c.yaml", 2, 0, 0, "Pod", "web", "", "100% of it: at last"), Severity: SeverityError, Rule: RulePod},
		{Error: at("ss.yaml", 1, -1, 5, "SidecarSet", "mesh", "", "typo"), Severity: SeverityWarning, Rule: "strict/update-strategy-type"},
		{Error: at("", 0, -1, 0, "", "", "", "2 document(s) not read"), Severity: SeverityNotice, Rule: "policy/dry"},
	}
	checked := Summary{Silenced: 1, SidecarSets: 3, Workloads: 2}
	const text = "2 error(s) in 1 of 3 SidecarSet(s); 1 more elsewhere in the input; 1 warning(s); 1 note(s); 1 silenced"

	t.Run("text", func(t *testing.T) {
		var out, errOut bytes.Buffer
		n, err := Write(&out, &errOut, Text, false, fs, checked)
		require.NoError(t, err)
		assert.Equal(t, Summary{Errors: 3, Warnings: 1, Notices: 1, Silenced: 1, SidecarSets: 3, Workloads: 2, Text: text}, n)
		assert.Empty(t, out.String(), "with errors, the summary goes with them")
		assert.Equal(t, "ss.yaml:4: document 1 (SidecarSet/mesh): spec.x: refused\n"+
			"ss.yaml:6: document 1 (SidecarSet/mesh): spec.y: also refused\n"+
			"a,b:c.yaml: document 2 items[0] (Pod/web): 100% of it: at last\n"+
			"warning: ss.yaml:5: document 1 (SidecarSet/mesh): typo [strict/update-strategy-type]\n"+
			"note: 2 document(s) not read [policy/dry]\n"+text+"\n", errOut.String())

		out.Reset()
		errOut.Reset()
		n, err = Write(&out, &errOut, Text, false, nil, Summary{SidecarSets: 2})
		require.NoError(t, err)
		assert.Equal(t, "2 SidecarSet(s) checked: no errors\n", out.String())
		assert.Zero(t, n.Errors)
	})
	t.Run("github", func(t *testing.T) {
		var out bytes.Buffer
		_, err := Write(&out, nil, GitHub, true, fs, checked)
		require.NoError(t, err)
		assert.Equal(t, "::error file=ss.yaml,line=4,title=sidecarctl sidecarset::document 1 (SidecarSet/mesh): spec.x: refused\n"+
			"::error file=ss.yaml,line=6,title=sidecarctl sidecarset::document 1 (SidecarSet/mesh): spec.y: also refused\n"+
			"::error file=a%2Cb%3Ac.yaml,title=sidecarctl pod::document 2 items[0] (Pod/web): 100%25 of it: at last\n"+
			"::warning file=ss.yaml,line=5,title=sidecarctl strict/update-strategy-type::document 1 (SidecarSet/mesh): typo\n"+
			"::notice title=sidecarctl policy/dry::2 document(s) not read\n"+text+"\n", out.String())
	})
	t.Run("json", func(t *testing.T) {
		var out bytes.Buffer
		_, err := Write(&out, nil, JSON, true, fs, checked)
		require.NoError(t, err)
		var doc Report
		require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
		assert.Equal(t, Schema, doc.Schema)
		assert.True(t, doc.Strict)
		require.Len(t, doc.Findings, len(fs))
		zero := 0
		assert.Equal(t, JSONFinding{File: "a,b:c.yaml", Document: 2, Item: &zero, Kind: "Pod", Name: "web",
			Severity: SeverityError, Message: "100% of it: at last", Rule: RulePod}, doc.Findings[2])
		assert.Nil(t, doc.Findings[0].Item, "not in a List")
		assert.Equal(t, text, doc.Summary.Text)

		out.Reset()
		_, err = Write(&out, nil, JSON, false, nil, Summary{})
		require.NoError(t, err)
		assert.Contains(t, out.String(), `"findings": []`, "a list always, empty when there are none")
	})
}
