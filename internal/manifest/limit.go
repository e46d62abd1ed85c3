package manifest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"unicode/utf8"

	yaml2 "go.yaml.in/yaml/v2"
	yaml3 "go.yaml.in/yaml/v3"
)

// DefaultMaxDocumentBytes is how large a document may be, as written and as JSON, when the caller
// sets no limit.
const DefaultMaxDocumentBytes = 64 << 20

// DefaultMaxInputBytes is how large the whole input may be, every document counted as for
// DefaultMaxDocumentBytes, when the caller sets no limit: room for two of the largest documents.
const DefaultMaxInputBytes = 2 * DefaultMaxDocumentBytes

// Reader reads manifests within a bound on what one document, and the whole input, may cost. The
// zero value reads documents of up to DefaultMaxDocumentBytes and inputs of up to
// DefaultMaxInputBytes.
//
// A document costs the larger of its size as written and the size of the JSON it converts to,
// every YAML alias counted at the size of what it names and every string as the JSON encoder
// writes it (a YAML escape such as \x01 decodes to one byte, which the conversion writes back as
// the six of \u0001, once per alias). That JSON is built whole, and kept with the object read
// from it.
type Reader struct {
	// MaxDocumentBytes bounds each document. A document over it is an error of its own, found
	// before it is expanded; the others are read. Zero or less is DefaultMaxDocumentBytes.
	MaxDocumentBytes int64
	// MaxInputBytes bounds the sum over every document of every source. The document that would
	// take the sum over it is an error, found before it is expanded, and nothing after it is read;
	// neither is a file larger than what is left. Zero or less is DefaultMaxInputBytes.
	MaxInputBytes int64
	// DocumentLimitName and InputLimitName name the bounds in error messages, e.g. the flags that
	// set them; optional.
	DocumentLimitName, InputLimitName string
}

// ReadInput is the package's ReadInput within rd's bounds.
func (rd Reader) ReadInput(stdin io.Reader, paths ...string) Input {
	r := reader{limit: rd.budget()}
	for _, p := range paths {
		r.path(p, stdin)
	}
	return r.result()
}

// DecodeInput is the package's DecodeInput within rd's bounds.
func (rd Reader) DecodeInput(source string, data []byte) Input {
	r := reader{limit: rd.budget()}
	r.source(source, data)
	return r.result()
}

func (rd Reader) budget() *budget {
	b := &budget{doc: rd.MaxDocumentBytes, input: rd.MaxInputBytes, docName: rd.DocumentLimitName, inputName: rd.InputLimitName}
	if b.doc <= 0 {
		b.doc = DefaultMaxDocumentBytes
	}
	if b.input <= 0 {
		b.input = DefaultMaxInputBytes
	}
	return b
}

// budget is what a reader may still read: the bound on each document, and what is left of the
// bound on the whole input.
type budget struct {
	doc, input         int64
	docName, inputName string
	// used is what the documents read so far cost; spent is set once one did not fit, after
	// which nothing more is read.
	used  int64
	spent bool
}

// What a document's size is measured as, in error messages.
const (
	asWritten = "bytes as written"
	asJSON    = "bytes as JSON, its YAML aliases and escapes expanded"
)

// fits is the reason a document of size bytes (measured as what) is refused, "" when it fits: over
// the bound per document, or over what is left of the bound on the input (overInput). It takes
// nothing from the budget (take does).
func (b *budget) fits(size int64, what string) string {
	if size > b.doc {
		return fmt.Sprintf("%d %s, over the limit of %d bytes per document%s", size, what, b.doc, named(b.docName))
	}
	return b.overInput(size, what)
}

// overInput is the reason a document or a file of size bytes (measured as what) is refused when it
// is more than what is left of the bound on the input, which spends the budget; "" when it fits.
func (b *budget) overInput(size int64, what string) string {
	if size <= b.left() {
		return ""
	}
	b.spent = true
	return fmt.Sprintf("%d %s, bringing the input to %d bytes, over the limit of %d bytes for the whole input%s; the rest of the input is not read",
		size, what, addSaturating(b.used, size), b.input, named(b.inputName))
}

func (b *budget) take(size int64) { b.used = addSaturating(b.used, size) }

func (b *budget) left() int64 { return b.input - b.used }

func named(name string) string {
	if name == "" {
		return ""
	}
	return " (" + name + ")"
}

// readFile reads the file at path unless it is larger than what is left of the budget: the file
// and everything after it are then left unread, and the error says why.
func (b *budget) readFile(path string) ([]byte, error) {
	f, err := os.Open(path) //nolint:gosec // G304: reading the files the user names is what the reader is for
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	size := int64(-1)
	if info, err := f.Stat(); err == nil && info.Mode().IsRegular() {
		size = info.Size()
	}
	return b.readAll(f, size)
}

// readAll reads r, whose size is known when not negative, unless it holds more than what is left
// of the budget. Reading stops there, so a larger input costs no more memory than the bound.
func (b *budget) readAll(r io.Reader, size int64) ([]byte, error) {
	left := b.left()
	if reason := b.overInput(size, asWritten); reason != "" {
		return nil, errors.New(reason)
	}
	data, err := io.ReadAll(io.LimitReader(r, addSaturating(left, 1)))
	if err != nil || int64(len(data)) <= left {
		return data, err
	}
	b.spent = true
	return nil, fmt.Errorf("more than %d %s, bringing the input over the limit of %d bytes for the whole input%s; the rest of the input is not read",
		left, asWritten, b.input, named(b.inputName))
}

// maxGrowth is how many times larger than its text the JSON of a document without aliases can
// possibly be, with room to spare: a character becomes at most a six-byte escape (\u003c for
// '<'), and the shortest scalars gain quotes, separators and nulls. A document for which that many
// times its text still fits is converted without measuring it first, and what its JSON really
// costs is taken from the budget afterwards.
const maxGrowth = 16

// checkYAMLSize refuses, before it is converted, a YAML document whose conversion to JSON would
// not fit the budget: its text, and then, when it may hold aliases or is large enough to be
// expanded past the budget, the JSON its node tree describes, measured without expanding a single
// alias. The conversion itself (go.yaml.in/yaml/v2, through sigs.k8s.io/yaml) expands every alias
// in memory and writes every string out with escapes, which is how a small file becomes
// gigabytes. line, when not 0, is the line of text the reason is about.
func (b *budget) checkYAMLSize(text []byte) (reason string, line int) {
	written := int64(len(text))
	if reason := b.fits(written, asWritten); reason != "" {
		return reason, 0
	}
	// An alias is written '*' and a name; without that character there is nothing to expand.
	if bytes.IndexByte(text, '*') < 0 && written <= min(b.doc, b.left())/maxGrowth {
		return "", 0
	}
	var doc yaml3.Node
	if err := yaml3.Unmarshal(text, &doc); err != nil {
		// The conversion's parser has the last word on syntax: when it refuses the text too, it
		// does so before expanding anything, and its message is the one to show.
		if yaml2.Unmarshal(text, parseOnly{}) != nil {
			return "", 0
		}
		return "its size as JSON could not be measured: " + err.Error(), 0
	}
	size, selfAlias := jsonSize(&doc, map[*yaml3.Node]int64{})
	if selfAlias != nil {
		return fmt.Sprintf("the YAML alias *%s is inside the node it names", selfAlias.Value), selfAlias.Line
	}
	return b.fits(size, asJSON), 0
}

// parseOnly is a target that makes go.yaml.in/yaml/v2 parse a document and decode none of it.
type parseOnly struct{}

func (parseOnly) UnmarshalYAML(func(any) error) error { return nil }

// inProgress marks, in jsonSize's memo, a node being measured.
const inProgress = -1

// jsonSize is the size of the JSON n converts to, or a little more (scalarSize), each alias
// counted at the size of the node it names. Each anchored node is measured once (memo), so the
// work is linear in the tree however many times aliases repeat it; sizes saturate rather than
// overflow. An alias inside the node it names has no size (the conversion refuses it too): it is
// returned instead.
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
		size = scalarSize(n)
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

// scalarSize is the size of the JSON scalar n converts to, or a little more. A string is written
// by encoding/json, escapes and all; !!binary is the string its base64 decodes to. Any other
// scalar, and any plain one, may convert to a number, a boolean or null instead (go.yaml.in/yaml/v2
// reads a plain n as false), whose JSON is at most two bytes longer than the quoted string.
func scalarSize(n *yaml3.Node) int64 {
	value := n.Value
	tag := n.ShortTag()
	if tag == binaryTag {
		// As the conversion decodes it; when it cannot, the conversion fails and any size will do.
		if data, err := base64.StdEncoding.DecodeString(value); err == nil {
			value = string(data)
		}
	}
	size := jsonStringSize(value)
	if n.Style&(yaml3.DoubleQuotedStyle|yaml3.SingleQuotedStyle|yaml3.LiteralStyle|yaml3.FoldedStyle) == 0 ||
		tag != strTag && tag != binaryTag {
		size += int64(len("null") - len(`""`))
	}
	return size
}

const (
	strTag    = "!!str"
	binaryTag = "!!binary"
)

// jsonStringSize is the size of s as encoding/json writes it, quotes included. It encodes s piece
// by piece, cut between characters, so that measuring a long string costs no more memory than a
// piece; each piece's quotes and the newline json.Encoder ends it with are not counted.
func jsonStringSize(s string) int64 {
	const piece = 4 << 10
	var w byteCounter
	enc := json.NewEncoder(&w)
	pieces := int64(0)
	for len(s) > 0 {
		end := min(len(s), piece)
		// Cutting a character would make each of its bytes an invalid one, which the encoder
		// writes as \ufffd; bytes that are invalid already are written so however they are cut.
		for i := 1; i < utf8.UTFMax && end < len(s) && !utf8.RuneStart(s[end]); i++ {
			end++
		}
		_ = enc.Encode(s[:end]) // a string always encodes
		s = s[end:]
		pieces++
	}
	return int64(w) - pieces*int64(len("\"\"\n")) + int64(len(`""`))
}

// byteCounter is a writer that counts what is written to it.
type byteCounter int64

func (c *byteCounter) Write(p []byte) (int, error) {
	*c += byteCounter(len(p))
	return len(p), nil
}

func addSaturating(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
