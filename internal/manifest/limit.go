package manifest

import (
	"bytes"
	"fmt"
	"io"
	"math"

	yaml2 "go.yaml.in/yaml/v2"
	yaml3 "go.yaml.in/yaml/v3"
)

// DefaultMaxDocumentBytes is how large a document may be, its YAML aliases expanded, when the
// caller sets no limit.
const DefaultMaxDocumentBytes = 64 << 20

// Reader reads manifests within a bound on what one document may cost. The zero value reads
// documents of up to DefaultMaxDocumentBytes.
type Reader struct {
	// MaxDocumentBytes bounds each document: its size as written, and the size of the JSON it
	// converts to, every YAML alias counted at the size of what it names. A document over it is
	// an error of its own; the others are read. Zero or less is DefaultMaxDocumentBytes.
	MaxDocumentBytes int64
	// LimitName names the bound in error messages, e.g. the flag that sets it; optional.
	LimitName string
}

// ReadInput is the package's ReadInput within rd's bound.
func (rd Reader) ReadInput(stdin io.Reader, paths ...string) Input {
	r := reader{limit: rd.limit()}
	for _, p := range paths {
		r.path(p, stdin)
	}
	return r.result()
}

// DecodeInput is the package's DecodeInput within rd's bound.
func (rd Reader) DecodeInput(source string, data []byte) Input {
	r := reader{limit: rd.limit()}
	r.source(source, data)
	return r.result()
}

func (rd Reader) limit() docLimit {
	l := docLimit{max: rd.MaxDocumentBytes, name: rd.LimitName}
	if l.max <= 0 {
		l.max = DefaultMaxDocumentBytes
	}
	return l
}

// docLimit is the bound a reader holds each document to.
type docLimit struct {
	max  int64
	name string
}

// over is the reason a document of size bytes (what is "bytes as written" or "bytes once its
// YAML aliases are expanded") is refused, "" when it is within the bound.
func (l docLimit) over(size int64, what string) string {
	if size <= l.max {
		return ""
	}
	reason := fmt.Sprintf("%d %s, over the limit of %d bytes per document", size, what, l.max)
	if l.name != "" {
		reason += " (" + l.name + ")"
	}
	return reason
}

// checkYAMLSize refuses a YAML document whose conversion to JSON would be larger than the limit:
// its text, and then, when it may hold aliases, the JSON its node tree describes, measured without
// expanding a single alias. The conversion itself (go.yaml.in/yaml/v2, through sigs.k8s.io/yaml)
// expands every alias in memory, which is how a small file becomes gigabytes. line, when not 0, is
// the line of text the reason is about.
func (l docLimit) checkYAMLSize(text []byte) (reason string, line int) {
	if reason := l.over(int64(len(text)), "bytes as written"); reason != "" {
		return reason, 0
	}
	// An alias is written '*' and a name; without that character there is nothing to expand, and
	// the JSON is as large as the text give or take quoting.
	if bytes.IndexByte(text, '*') < 0 {
		return "", 0
	}
	var doc yaml3.Node
	if err := yaml3.Unmarshal(text, &doc); err != nil {
		// The conversion's parser has the last word on syntax: when it refuses the text too, it
		// does so before expanding anything, and its message is the one to show.
		if yaml2.Unmarshal(text, parseOnly{}) != nil {
			return "", 0
		}
		return "its YAML aliases could not be measured: " + err.Error(), 0
	}
	size, selfAlias := jsonSize(&doc, map[*yaml3.Node]int64{})
	if selfAlias != nil {
		return fmt.Sprintf("the YAML alias *%s is inside the node it names", selfAlias.Value), selfAlias.Line
	}
	return l.over(size, "bytes once its YAML aliases are expanded"), 0
}

// parseOnly is a target that makes go.yaml.in/yaml/v2 parse a document and decode none of it.
type parseOnly struct{}

func (parseOnly) UnmarshalYAML(func(any) error) error { return nil }

// inProgress marks, in jsonSize's memo, a node being measured.
const inProgress = -1

// jsonSize is the size of the JSON n converts to, string escapes aside, each alias counted at the
// size of the node it names. Each anchored node is measured once (memo), so the work is linear in
// the tree however many times aliases repeat it; sizes saturate rather than overflow. An alias
// inside the node it names has no size (the conversion refuses it too): it is returned instead.
func jsonSize(n *yaml3.Node, memo map[*yaml3.Node]int64) (int64, *yaml3.Node) {
	if n.Anchor != "" {
		if size, ok := memo[n]; ok {
			return size, nil
		}
		memo[n] = inProgress
	}
	var size int64
	switch n.Kind {
	case yaml3.ScalarNode:
		size = int64(len(n.Value)) + int64(len(`""`))
	case yaml3.AliasNode:
		if memo[n.Alias] == inProgress {
			return 0, n
		}
		s, selfAlias := jsonSize(n.Alias, memo)
		if selfAlias != nil {
			return 0, selfAlias
		}
		size = s
	default: // a document, a sequence or a mapping: its brackets (a document has none), and a separator per element
		if n.Kind != yaml3.DocumentNode {
			size = int64(len("{}"))
		}
		for _, c := range n.Content {
			s, selfAlias := jsonSize(c, memo)
			if selfAlias != nil {
				return 0, selfAlias
			}
			size = addSaturating(size, addSaturating(s, 1))
		}
	}
	if n.Anchor != "" {
		memo[n] = size
	}
	return size, nil
}

func addSaturating(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
