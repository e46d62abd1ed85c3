package manifest

import (
	"strconv"
	"strings"
)

// Position says where an object, or a problem, is in the input.
type Position struct {
	// Source is the file path as found (joined to the -f directory), or "<stdin>".
	Source string
	// Doc is the 1-based index of the YAML or JSON document in Source; 0 for the whole source.
	Doc int
	// Item is the index of the object in the items of a v1/List document, or -1.
	Item int
}

// String renders the position as error messages show it, e.g. "a.yaml: document 2 items[0]".
func (p Position) String() string {
	s := p.Source
	if p.Doc > 0 {
		s += ": document " + strconv.Itoa(p.Doc)
		if p.Item >= 0 {
			s += " items[" + strconv.Itoa(p.Item) + "]"
		}
	}
	return s
}

// Error is one problem with the input. Its message is always a single line, the line of the file
// after its name when it is known:
//
//	examples/bad.yaml:14: document 2 (SidecarSet/logging): spec.containers[0].imagee: unknown field
type Error struct {
	Position
	// Kind and Name identify the object when they could be read; either may be empty.
	Kind, Name string
	// Line is the 1-based line in Source of the field, or of what is wrong (a syntax error), or of
	// the document; 0 when unknown.
	Line int
	// Field is the path of the offending field in the object (or, for a ConfigMap whitelist, in
	// its data), empty when the problem is not about one field.
	Field string
	// Reason says what is wrong.
	Reason string
}

func (e *Error) Error() string {
	head := e.Source
	if e.Line > 0 && head != "" {
		head += ":" + strconv.Itoa(e.Line)
	}
	if e.Doc > 0 {
		head = Position{Source: head, Doc: e.Doc, Item: e.Item}.String()
	}
	if ref := objectRef(e.Kind, e.Name); ref != "" {
		if head == "" {
			head = ref
		} else {
			head += " (" + ref + ")"
		}
	}
	var nonEmpty []string
	for _, p := range []string{head, e.Field, e.Reason} {
		if p != "" {
			nonEmpty = append(nonEmpty, p)
		}
	}
	return oneLine(strings.Join(nonEmpty, ": "))
}

func objectRef(kind, name string) string {
	switch {
	case kind != "" && name != "":
		return kind + "/" + name
	case kind != "":
		return kind
	case name != "":
		return "name " + strconv.Quote(name)
	}
	return ""
}

// oneLine keeps the one-problem-per-line promise even when a parser's message, a YAML key or a
// value spans lines: line breaks are shown escaped rather than dropped.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(s)
}

// Errors is every problem found in the input, in input order. Its message has one line per problem.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// err returns es as an error, nil when empty: a nil Errors in an error interface would not be nil.
func (es Errors) err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// fieldError is a problem at a path inside one document, before the position is known.
type fieldError struct {
	field, reason string
}

// joinPath appends a key to a field path in the notation of sigs.k8s.io/json's strict errors
// (a.b[0].c), so that all field errors read alike whichever check found them.
func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func indexPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}
