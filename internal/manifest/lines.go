package manifest

import (
	"strconv"
	"strings"
	"sync"

	yaml3 "go.yaml.in/yaml/v3"
)

// docText is one document as written, kept so that a field path can be turned into the file line
// a reader would look at. It is parsed only when a line is asked for, which is when something is
// reported: input without problems costs no second parse.
type docText struct {
	text  []byte
	start int // the file line of text's first line

	once  sync.Once
	first int         // the line of text where the document starts (firstContentLine)
	root  *yaml3.Node // nil when text does not parse as YAML (JSON is YAML)
}

// lines finds the lines of an object's fields in the document it was decoded from; prefix is the
// object's own path in that document ("items[2]" for an item of a v1/List).
type lines struct {
	doc    *docText
	prefix string
}

func newLines(text []byte, start int) *lines {
	if start < 1 {
		start = 1
	}
	return &lines{doc: &docText{text: text, start: start}}
}

// item is the lines of the i-th item of a v1/List.
func (l *lines) item(i int) *lines {
	if l == nil {
		return nil
	}
	return &lines{doc: l.doc, prefix: indexPath(joinPath(l.prefix, "items"), i)}
}

// of is the file line of field (a path such as spec.containers[0].image or
// metadata.annotations[a.b/c]), or of its deepest ancestor written in the document when the field
// itself is not (a required field that is missing is reported where its parent is); the
// document's first line when nothing of it is; 0 when the document is unknown.
func (l *lines) of(field string) int {
	if l == nil {
		return 0
	}
	d := l.doc
	d.once.Do(func() {
		// Once per document: a v1/List's items all ask, and the text may be long.
		d.first = firstContentLine(d.text)
		// A third-party parser fed with what another one read: should it panic, the document's own
		// line is the answer, as for text it does not parse.
		defer func() { _ = recover() }()
		var n yaml3.Node
		if yaml3.Unmarshal(d.text, &n) == nil {
			d.root = &n
		}
	})
	line := d.first
	if d.root != nil {
		path := field
		if l.prefix != "" {
			path = strings.TrimSuffix(l.prefix+"."+field, ".")
		}
		if n := lookup(d.root, path); n > 0 {
			line = n
		}
	}
	return d.start + line - 1
}

// firstContentLine is the line of text (from 1) where the document starts: its first line that is
// neither blank nor a comment.
func firstContentLine(text []byte) int {
	for i, l := range strings.Split(string(text), "\n") {
		t := strings.TrimSpace(l)
		if t != "" && t[0] != '#' && t[0] != '%' {
			return i + 1
		}
	}
	return 1
}

// lookup follows path through n and returns the line of the deepest node it reaches: for a
// mapping member its key's line, for a sequence item the item's. 0 when not even the first step
// is found.
func lookup(n *yaml3.Node, path string) int {
	line := 0
	for {
		n = resolve(n)
		if n == nil {
			return line
		}
		path = strings.TrimPrefix(path, ".")
		if path == "" {
			return line
		}
		var next *yaml3.Node
		var at int
		if strings.HasPrefix(path, "[") {
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return line
			}
			inner, rest := path[1:end], path[end+1:]
			switch n.Kind {
			case yaml3.SequenceNode:
				i, err := strconv.Atoi(inner)
				if err != nil || i < 0 || i >= len(n.Content) {
					return line
				}
				next, at = n.Content[i], n.Content[i].Line
			case yaml3.MappingNode:
				k, v := mappingMember(n, func(key string) bool { return key == inner })
				if v == nil {
					return line
				}
				next, at = v, k.Line
			default:
				return line
			}
			path = rest
		} else {
			if n.Kind != yaml3.MappingNode {
				return line
			}
			// A key may hold dots itself (metadata.labels.app.kubernetes.io/name): the longest key
			// that the path continues from is the one meant.
			var key string
			k, v := mappingMember(n, func(candidate string) bool {
				if len(candidate) < len(key) || !strings.HasPrefix(path, candidate) {
					return false
				}
				if rest := path[len(candidate):]; rest != "" && rest[0] != '.' && rest[0] != '[' {
					return false
				}
				key = candidate
				return true
			})
			if v == nil {
				return line
			}
			next, at, path = v, k.Line, path[len(key):]
		}
		n, line = next, at
	}
}

// mappingMember returns the last key of mapping n that match accepts, and its value; nil when none does.
// The last one, because the last of a repeated key is the value kept.
func mappingMember(n *yaml3.Node, match func(string) bool) (key, value *yaml3.Node) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml3.ScalarNode && match(k.Value) {
			key, value = k, n.Content[i+1]
		}
	}
	return key, value
}

// resolve steps through a document node and aliases to the node that holds the content.
func resolve(n *yaml3.Node) *yaml3.Node {
	for range 64 { // an alias chain is never longer; the bound only guards against a cycle
		switch {
		case n == nil:
			return nil
		case n.Kind == yaml3.DocumentNode:
			if len(n.Content) == 0 {
				return nil
			}
			n = n.Content[0]
		case n.Kind == yaml3.AliasNode:
			n = n.Alias
		default:
			return n
		}
	}
	return nil
}
