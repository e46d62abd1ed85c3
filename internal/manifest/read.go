package manifest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Stdin is the path that stands for standard input, as in `-f -`.
const Stdin = "-"

// internalError starts the reason of an error that is a bug of this package, not of the input.
const internalError = "internal error"

// StdinSource is how objects and errors from standard input name their source.
const StdinSource = "<stdin>"

// Object is one decoded object and where it came from.
type Object struct {
	Position
	// Index is the object's place among all objects of one Read or Decode call: input order, which
	// output keeps.
	Index int
	// Obj is the typed object: *v1alpha1.SidecarSet, *corev1.Namespace, *appsv1.ControllerRevision,
	// *corev1.ConfigMap, or a workload (*corev1.Pod, *appsv1.Deployment, *appsv1.StatefulSet,
	// *appsv1.DaemonSet, *appsv1.ReplicaSet, *batchv1.Job, *batchv1.CronJob). OpenKruise's workloads
	// and kinds this package does not read are the document itself, an *unstructured.Unstructured
	// (IsWorkload, IsPassThrough).
	Obj runtime.Object

	// lines places the object's fields in the file; raw is its JSON as read, which Written decodes
	// again; dropped are the fields whose values did not decode (a rejected object only).
	lines   *lines
	raw     []byte
	dropped []string
}

// String names the object as error messages do, e.g. "a.yaml: document 2 (Deployment/web)": by
// its place, without the line that Report adds.
func (o *Object) String() string {
	e := o.Report("", "")
	e.Line = 0
	return e.Error()
}

// Report is a problem with the object, at field (empty when it is not about one field), on the
// line of the field (Line).
func (o *Object) Report(field, reason string) *Error {
	e := &Error{Position: o.Position, Line: o.Line(field), Field: field, Reason: reason}
	if gvk, ok := gvkOf(o.Obj); ok {
		e.Kind = gvk.Kind
	}
	if m, ok := o.Obj.(metav1.Object); ok {
		e.Name = m.GetName()
	}
	return e
}

// Line is the file line of field in the object as written (spec.containers[0].image), or of its
// deepest ancestor that is written, or the object's first line; 0 when the object was not read
// from text.
func (o *Object) Line(field string) int {
	return o.lines.of(field)
}

// Written decodes the object again as it was read, before anything (defaulting) changed o.Obj. A
// rejected object comes back without the values that did not decode.
func (o *Object) Written() (runtime.Object, error) {
	if o.raw == nil {
		return nil, fmt.Errorf("manifest: %s was not read from a document", o)
	}
	var obj runtime.Object = &unstructured.Unstructured{}
	if k, ok := kindOf(o.Obj); ok && k.proto != nil {
		obj = reflect.New(reflect.TypeOf(k.proto).Elem()).Interface().(runtime.Object)
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(o.raw, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// Dropped reports whether field is, or is inside, a value of a rejected object that did not decode
// and was left out of it: a problem found there in what remains (say, a required field now
// missing) is a consequence of the error already reported, not one of its own.
func (o *Object) Dropped(field string) bool {
	for _, d := range o.dropped {
		if field == d || strings.HasPrefix(field, d) && (field[len(d)] == '.' || field[len(d)] == '[') {
			return true
		}
	}
	return false
}

// Input is what reading found.
type Input struct {
	// Objects are in input order; a document with any error contributes none.
	Objects []*Object
	// Rejected are the objects of the documents with errors that decoded nonetheless, the values
	// that did not decode left out (Dropped): never to be acted on, but to be checked further, so
	// that one run reports every problem of a document. They are in input order, and their
	// errors are in Errors.
	Rejected []*Object
	// Warnings are about input that was read other than as written (a repeated key: the last value
	// is kept, as kubectl keeps it) or not read at all (kustomize's configuration files). They keep
	// nothing out.
	Warnings Errors
	// Errors are the documents and files that gave no object, one entry per problem.
	Errors Errors
	// Sources are the files (and StdinSource) in the order they were read, those that could not
	// be read included: the input order of the positions above.
	Sources []string
}

// ReadInput decodes the manifests at paths, in order. A path is a file (read whatever its
// extension), a directory (walked recursively in lexical order, reading *.yaml, *.yml and *.json),
// or Stdin, read from stdin. Every problem in every file is collected. Documents are bounded by
// DefaultMaxDocumentBytes and the whole input by DefaultMaxInputBytes (Reader sets other bounds).
func ReadInput(stdin io.Reader, paths ...string) Input {
	return Reader{}.ReadInput(stdin, paths...)
}

// DecodeInput decodes one source's content (multi-document YAML, a JSON stream, v1/List
// documents), naming source in positions and errors. It is ReadInput for data already in memory.
func DecodeInput(source string, data []byte) Input {
	return Reader{}.DecodeInput(source, data)
}

// Read is ReadInput for callers with no one to show warnings to: err, when not nil, is the
// Errors.
func Read(stdin io.Reader, paths ...string) ([]*Object, error) {
	in := ReadInput(stdin, paths...)
	return in.Objects, in.Errors.err()
}

// Decode is DecodeInput for callers with no one to show warnings to: err, when not nil, is the
// Errors.
func Decode(source string, data []byte) ([]*Object, error) {
	in := DecodeInput(source, data)
	return in.Objects, in.Errors.err()
}

type reader struct {
	in        Input
	sources   map[string]bool
	stdinRead bool
	limit     *budget
}

func (r *reader) result() Input {
	for i, o := range r.in.Objects {
		o.Index = i
	}
	return r.in
}

func (r *reader) read(source string) {
	if !r.sources[source] {
		if r.sources == nil {
			r.sources = map[string]bool{}
		}
		r.sources[source] = true
		r.in.Sources = append(r.in.Sources, source)
	}
}

func (r *reader) fail(source string, err error) {
	r.read(source)
	reason := err.Error()
	// os errors repeat the path, which the message already starts with.
	var pe *fs.PathError
	if errors.As(err, &pe) {
		reason = pe.Op + ": " + pe.Err.Error()
	}
	r.in.Errors = append(r.in.Errors, &Error{Position: Position{Source: source, Item: -1}, Reason: reason})
}

func (r *reader) path(p string, stdin io.Reader) {
	if r.limit.spent {
		return
	}
	if p == Stdin {
		switch {
		case stdin == nil:
			r.fail(StdinSource, errors.New("standard input is not available"))
		case r.stdinRead:
			r.fail(StdinSource, errors.New("standard input given more than once"))
		default:
			r.stdinRead = true
			data, err := r.limit.readAll(stdin, -1)
			if err != nil {
				r.fail(StdinSource, err)
				return
			}
			r.source(StdinSource, data)
		}
		return
	}
	info, err := os.Stat(p)
	if err != nil {
		r.fail(p, err)
		return
	}
	if !info.IsDir() {
		r.file(p)
		return
	}
	found, failed := false, false
	// WalkDir visits entries in lexical order, which makes the output order deterministic.
	_ = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		switch {
		case r.limit.spent:
			return filepath.SkipAll
		case err != nil:
			r.fail(path, err)
			failed = true
		case !d.IsDir() && isManifestFile(path):
			found = true
			r.file(path)
		}
		return nil
	})
	if !found && !failed {
		// An empty result would otherwise look like success, e.g. after a typo in a directory name.
		r.fail(p, errors.New("directory holds no *.yaml, *.yml or *.json file"))
	}
}

func isManifestFile(path string) bool {
	switch filepath.Ext(path) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// kustomizationFiles are the names kustomize reads its configuration from. Such a file is no
// manifest (often it has neither apiVersion nor kind), and what it builds is not in the directory.
var kustomizationFiles = map[string]bool{"kustomization.yaml": true, "kustomization.yml": true, "Kustomization": true}

func (r *reader) file(path string) {
	if kustomizationFiles[filepath.Base(path)] {
		r.in.Warnings = append(r.in.Warnings, &Error{Position: Position{Source: path, Item: -1},
			Reason: "skipped: kustomize's configuration, not a manifest (read what it builds with `kustomize build " + filepath.Dir(path) + "` and -f -)"})
		return
	}
	data, err := r.limit.readFile(path)
	if err != nil {
		r.fail(path, err)
		return
	}
	r.source(path, data)
}

func (r *reader) source(name string, data []byte) {
	r.read(name)
	// The parsers are third-party code fed with arbitrary input. Should one of them panic, that is
	// one more error, in this source, rather than a crash of the CLI. (FuzzDecode treats it as a bug.)
	defer func() {
		if p := recover(); p != nil {
			r.in.Errors = append(r.in.Errors, &Error{Position: Position{Source: name, Item: -1}, Reason: fmt.Sprintf("%s: %v", internalError, p)})
		}
	}()
	for _, c := range r.limit.split(name, data) {
		if c.err != nil {
			r.in.Errors = append(r.in.Errors, c.err)
			continue
		}
		before := len(r.in.Errors)
		r.in.Objects = append(r.in.Objects, r.document(Position{Source: name, Doc: c.doc, Item: -1}, c.json, c.dups, c.lines)...)
		// Each check finds its own kind of problem; a reader goes through the document top down.
		slices.SortStableFunc(r.in.Errors[before:], func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	}
}

// chunk is one document of a source: its JSON, or the syntax error that prevented getting it.
type chunk struct {
	doc   int
	json  []byte
	dups  []fieldError // duplicate YAML keys, which the JSON no longer shows
	lines *lines
	err   *Error
}

var utf8BOM = []byte("\xef\xbb\xbf")

// split cuts a source into documents. A source whose first character is '{' is a JSON stream
// (one or more objects); anything else is multi-document YAML. Flow-style YAML can also start
// with '{', so a source that is not valid JSON but is valid YAML is read as YAML.
func (l *budget) split(source string, data []byte) []chunk {
	data = bytes.TrimPrefix(data, utf8BOM)
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return l.splitYAML(source, data)
	}
	before := *l
	chunks, err := l.splitJSON(source, data)
	if err == nil {
		return chunks
	}
	// What the documents read as JSON cost is given back while they are read again as YAML.
	readAsJSON := *l
	*l = before
	yamlChunks := l.splitYAML(source, data)
	for _, c := range yamlChunks {
		if c.err != nil {
			*l = readAsJSON
			return append(chunks, chunk{err: err})
		}
	}
	return yamlChunks
}

func (l *budget) splitJSON(source string, data []byte) ([]chunk, *Error) {
	var chunks []chunk
	dec := json.NewDecoder(bytes.NewReader(data))
	for doc := 1; ; doc++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return chunks, nil
		}
		if err != nil {
			e := &Error{Position: Position{Source: source, Doc: doc, Item: -1}, Reason: strings.TrimPrefix(err.Error(), "json: ")}
			var se *json.SyntaxError
			switch {
			case errors.As(err, &se):
				e.Line = lineAt(data, se.Offset-1)
			case errors.Is(err, io.ErrUnexpectedEOF):
				e.Line = lineAt(data, int64(len(data)))
			}
			return chunks, e
		}
		start := lineAt(data, dec.InputOffset()-int64(len(raw)))
		if reason := l.fits(int64(len(raw)), asWritten); reason != "" {
			chunks = append(chunks, chunk{doc: doc, err: &Error{Position: Position{Source: source, Doc: doc, Item: -1}, Line: start, Reason: reason}})
			if l.spent {
				return chunks, nil
			}
			continue
		}
		l.take(int64(len(raw)))
		chunks = append(chunks, chunk{doc: doc, json: raw, lines: newLines(raw, start)})
	}
}

func lineAt(data []byte, offset int64) int {
	offset = max(0, min(offset, int64(len(data))))
	return 1 + bytes.Count(data[:offset], []byte("\n"))
}

// splitYAML cuts multi-document YAML at "---" and "..." lines, itself rather than with
// apimachinery's YAMLReader, for two reasons: document indices must be those a reader of the file
// counts (YAMLReader drops empty documents before numbering), and each document's first line must
// be known to turn the YAML parser's document-relative line numbers into file lines. YAML takes
// such a line at column 0 for a document marker even inside a scalar, so cutting at lines agrees
// with the parser.
func (l *budget) splitYAML(source string, data []byte) []chunk {
	var (
		chunks   []chunk
		buf      bytes.Buffer
		doc      int
		start    = 1     // file line of buf's first line
		explicit = false // buf was opened by "---": an empty document, but a document
	)
	flush := func() {
		// Once a document has not fit the budget, the rest of the input is not read.
		if !l.spent && (explicit || hasYAMLContent(buf.Bytes())) {
			doc++
			chunks = append(chunks, l.yamlChunk(source, doc, start, bytes.Clone(buf.Bytes())))
		}
		buf.Reset()
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, line := range lines {
		if l.spent {
			break
		}
		switch yamlMarker(line) {
		case "---":
			flush()
			start, explicit = i+1, true
			// Keep the marker's line (blanked) so that line numbers stay aligned and content after
			// the marker ("--- # note") stays in its document.
			buf.WriteString("   ")
			buf.Write(line[3:])
		case "...":
			buf.WriteString("\n")
			flush()
			start, explicit = i+2, false
		default:
			buf.Write(line)
		}
	}
	flush()
	return chunks
}

func yamlMarker(line []byte) string {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) < 3 || (len(line) > 3 && line[3] != ' ' && line[3] != '\t') {
		return ""
	}
	switch string(line[:3]) {
	case "---", "...":
		return string(line[:3])
	}
	return ""
}

// hasYAMLContent reports whether text holds anything but blank lines, comments and directives:
// text before the first "---" or after "..." is a document only if it does.
func hasYAMLContent(text []byte) bool {
	for _, line := range bytes.Split(text, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' && line[0] != '%' {
			return true
		}
	}
	return false
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// yamlParserProblems are the messages of go.yaml.in/yaml/v2's parser (parserc.go), as opposed to
// its scanner. It numbers lines from 1 for scanner errors but from 0 for parser errors, which would
// point one line above the problem (e.g. a mis-indented key).
var yamlParserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

func (l *budget) yamlChunk(source string, doc, start int, text []byte) chunk {
	if reason, line := l.checkYAMLSize(text); reason != "" {
		if line == 0 {
			line = firstContentLine(text)
		}
		e := &Error{Position: Position{Source: source, Doc: doc, Item: -1}, Line: start + line - 1, Reason: reason}
		return chunk{doc: doc, err: e}
	}
	j, err := yaml.YAMLToJSON(text)
	l.take(max(int64(len(text)), int64(len(j))))
	var dups []fieldError
	if err == nil {
		dups, err = yamlCheck(text)
	}
	if err == nil {
		return chunk{doc: doc, json: j, dups: dups, lines: newLines(text, start)}
	}
	e := &Error{Position: Position{Source: source, Doc: doc, Item: -1}}
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
		if yamlParserProblems[msg] {
			n++
		}
		e.Line = start + n - 1
	}
	e.Reason = strings.TrimPrefix(msg, "yaml: ")
	// Since go1.27 encoding/json refuses to encode nesting it would refuse to decode, so the
	// conversion fails where decoding used to: said alike, at the document's first line.
	if strings.HasSuffix(e.Reason, maxDepth) {
		e.Reason, e.Line = tooDeep, start+firstContentLine(text)-1
	}
	if v, ok := strings.CutPrefix(e.Reason, "json: unsupported value: "); ok {
		e.Reason = v + " has no JSON form: JSON numbers have no infinity or NaN (YAML's .inf, .nan)"
	}
	return chunk{doc: doc, err: e}
}

// duplicateField is the reason sigs.k8s.io/json and yamlCheck give for a key written twice.
const duplicateField = "duplicate field"

// lastValueKept is what a repeated key warns: kubectl converts YAML with the same library, keeps the
// last value and sends the API server JSON without the repetition, so a cluster takes it.
const lastValueKept = duplicateField + ": the last value is kept, as kubectl keeps it"

// document decodes one document's JSON; dups are its duplicate YAML keys, found earlier, and ln
// places its fields in the file. Its problems go to r; a document with any error contributes no
// object, but one that decodes nonetheless is kept among the rejected.
func (r *reader) document(pos Position, data []byte, dups []fieldError, ln *lines) []*Object {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || bytes.Equal(data, []byte("null")) {
		return nil // an empty document
	}
	h := readHeader(data)
	before := len(r.in.Errors)
	fail := func(fes ...fieldError) {
		for _, fe := range fes {
			r.in.Errors = append(r.in.Errors, &Error{Position: pos, Kind: h.kind, Name: h.name, Line: ln.of(fe.field), Field: fe.field, Reason: fe.reason})
		}
	}
	if data[0] != '{' {
		fail(fieldError{reason: "expected an object, got " + jsonValueName(data)})
		return nil
	}
	r.warnDuplicates(pos, h, dups, ln)
	if len(h.errs) > 0 {
		fail(h.errs...)
		return nil
	}
	if h.gvk == listGVK {
		if pos.Item >= 0 {
			fail(fieldError{field: "kind", reason: "a List inside a List is not supported"})
			return nil
		}
		var list corev1.List
		errs, dups, _ := decodeStrict(data, &list, "")
		fail(errs...)
		r.warnDuplicates(pos, h, dups, ln)
		var objs []*Object
		for i, item := range list.Items {
			itemPos := pos
			itemPos.Item = i
			objs = append(objs, r.document(itemPos, item.Raw, nil, ln.item(i))...)
		}
		if len(r.in.Errors) > before {
			// The List contributes nothing; its good items are still worth checking.
			r.in.Rejected = append(r.in.Rejected, objs...)
			return nil
		}
		return objs
	}
	k, known := kindsByGVK[h.gvk]
	if !known {
		if fe, ok := unsupported(h.gvk); ok {
			fail(fe)
			return nil
		}
	}
	obj, errs, dups, kept := decodeObject(k, data)
	fail(errs...)
	r.warnDuplicates(pos, h, dups, ln)
	o := &Object{Position: pos, Obj: obj, lines: ln, raw: kept}
	if len(errs) > 0 {
		if kept != nil {
			for _, fe := range errs {
				o.dropped = append(o.dropped, fe.field)
			}
			r.in.Rejected = append(r.in.Rejected, o)
		}
		return nil
	}
	return []*Object{o}
}

func (r *reader) warnDuplicates(pos Position, h header, dups []fieldError, ln *lines) {
	for _, fe := range dups {
		r.in.Warnings = append(r.in.Warnings, &Error{Position: pos, Kind: h.kind, Name: h.name, Line: ln.of(fe.field), Field: fe.field, Reason: lastValueKept})
	}
}

// decodeObject decodes a document of kind k, nil for a kind this package does not read: such a
// document is kept as it is, to be passed on. kept is what of data decoded: data itself, or,
// when some values are of the wrong type, data without them; nil when nothing did.
func decodeObject(k *kind, data []byte) (obj runtime.Object, errs, dups []fieldError, kept []byte) {
	if k != nil && k.proto != nil {
		obj = reflect.New(reflect.TypeOf(k.proto).Elem()).Interface().(runtime.Object)
		errs, dups, kept = decodeStrict(data, obj, "")
		return obj, errs, dups, kept
	}
	u := &unstructured.Unstructured{}
	errs, dups, kept = decodeStrict(data, &u.Object, "")
	if k != nil && len(errs) == 0 {
		errs = checkDocument(u.Object, k)
	}
	return u, errs, dups, kept
}

// checkDocument holds an OpenKruise workload to the form its CRD's schema does where it matters
// here: metadata and the pod template, decoded as the Kubernetes types they are.
func checkDocument(doc map[string]any, k *kind) []fieldError {
	var errs []fieldError
	check := func(v any, into any, path string) {
		raw, err := json.Marshal(v)
		if err != nil {
			errs = append(errs, fieldError{field: path, reason: err.Error()})
			return
		}
		more, _, _ := decodeStrict(raw, into, path)
		errs = append(errs, more...)
	}
	if meta, ok := doc["metadata"]; ok {
		check(meta, &metav1.ObjectMeta{}, "metadata")
	}
	var node any = doc
	path := ""
	for _, key := range k.template {
		m, ok := node.(map[string]any)
		if !ok {
			raw, _ := json.Marshal(node)
			return append(errs, fieldError{field: path, reason: "expected object, got " + jsonValueName(raw)})
		}
		if node, ok = m[key]; !ok {
			return errs // no template: an empty one, as in a typed workload
		}
		path = joinPath(path, key)
	}
	check(node, &corev1.PodTemplateSpec{}, path)
	return errs
}

// decodeStrict decodes data into v (a pointer) as the API server's strict field validation reads
// it: unknown fields and values of the wrong type are errors, each with its path under path, and
// repeated keys are returned apart (dups), the last value decoded.
//
// A value of the wrong type does not hide the rest: v is what decodes without such values, and
// kept its JSON (data itself when all is well), so that the unknown fields are found too and the
// caller can check the rest further. kept is nil when even that does not decode.
func decodeStrict(data []byte, v any, path string) (errs, dups []fieldError, kept []byte) {
	kept = data
	strict, err := kjson.UnmarshalStrict(data, v)
	if err != nil {
		errs, kept = typeErrors(data, reflect.TypeOf(v).Elem(), path)
		if kept == nil {
			return errs, nil, nil
		}
		target := reflect.ValueOf(v).Elem()
		target.SetZero()
		if strict, err = kjson.UnmarshalStrict(kept, v); err != nil {
			return errs, nil, nil
		}
	}
	for _, fe := range strictErrors(strict) {
		fe.field = joinPath(path, fe.field)
		if fe.reason == duplicateField {
			dups = append(dups, fe)
		} else {
			errs = append(errs, fe)
		}
	}
	return errs, dups, kept
}

// header is what is read of a document before decoding it: enough to pick its type and to name
// it in errors even when it does not decode.
type header struct {
	gvk        schema.GroupVersionKind
	kind, name string
	errs       []fieldError
}

func readHeader(data []byte) header {
	var h header
	var top map[string]json.RawMessage
	if kjson.UnmarshalCaseSensitivePreserveInts(data, &top) != nil {
		return h
	}
	str := func(key string) string {
		raw, ok := top[key]
		var s string
		if ok && kjson.UnmarshalCaseSensitivePreserveInts(raw, &s) != nil {
			h.errs = append(h.errs, fieldError{field: key, reason: "expected string, got " + jsonValueName(raw)})
			return ""
		}
		if s == "" {
			h.errs = append(h.errs, fieldError{field: key, reason: "missing"})
		}
		return s
	}
	apiVersion, kind := str("apiVersion"), str("kind")
	h.kind = kind
	var meta struct {
		Name string `json:"name"`
	}
	_ = kjson.UnmarshalCaseSensitivePreserveInts(top["metadata"], &meta)
	h.name = meta.Name
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		h.errs = append(h.errs, fieldError{field: "apiVersion", reason: err.Error()})
	}
	h.gvk = gv.WithKind(kind)
	return h
}

func strictErrors(errs []error) []fieldError {
	out := make([]fieldError, 0, len(errs))
	for _, err := range errs {
		var fe kjson.FieldError
		if !errors.As(err, &fe) {
			out = append(out, fieldError{reason: err.Error()})
			continue
		}
		// The message is `<reason> "<path>"`; the path goes to Field, the rest is the reason.
		path := fe.FieldPath()
		out = append(out, fieldError{field: path, reason: strings.TrimSuffix(err.Error(), " "+strconv.Quote(path))})
	}
	return out
}

// unsupported refuses a kind of a group this package reads in a version it does not (e.g.
// apps.kruise.io/v1beta1 SidecarSet), naming the supported ones: passing it on unread would
// silently leave out a SidecarSet or a workload. A kind of another group (Volcano's
// batch.volcano.sh Job) is not its business (ok false).
//
// A SidecarSet is refused in any group but its own, too: no other group serves one, so such a
// document is a mistyped apiVersion (apps:kruise.io/v1alpha1 is in public repositories), which
// the API server refuses, and ignoring it would silently leave the SidecarSet out.
func unsupported(gvk schema.GroupVersionKind) (fieldError, bool) {
	var versions []string
	for _, known := range supportedKinds() {
		if known.GroupKind() == gvk.GroupKind() || gvk.Kind == sidecarSetKind && known.Kind == sidecarSetKind {
			versions = append(versions, known.GroupVersion().String())
		}
	}
	if len(versions) == 0 {
		return fieldError{}, false
	}
	return fieldError{field: "apiVersion", reason: fmt.Sprintf("unsupported apiVersion %q for kind %s (supported: %s)",
		gvk.GroupVersion().String(), gvk.Kind, strings.Join(versions, ", "))}, true
}
