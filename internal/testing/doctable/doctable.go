// Package doctable reads the reference tables of docs/*.md and what the code defines that they
// list, so that tests can hold the two equal: metrics with their labels, and Event reasons. It also
// finds the performance figures a document states (Figures), which belong in docs/benchmarks.md alone.
package doctable

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Root is the module's root directory, found from the working directory, so tests keep working
// when their package moves.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
		dir = parent
	}
}

// Doc reads docs/name of the module.
func Doc(name string) ([]byte, error) {
	root, err := Root()
	if err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(root, "docs", name))
}

// A Table is the body rows of one markdown table, each row's cells trimmed.
type Table struct {
	Header []string
	Rows   [][]string
}

// Tables returns the tables of markdown under the heading whose text is heading (any level), up
// to the next heading of the same or a higher level; heading "" means the whole document.
func Tables(markdown []byte, heading string) ([]Table, error) {
	var tables []Table
	var cur *Table
	in, level, found := heading == "", 0, heading == ""
	fenced := false
	sc := bufio.NewScanner(bytes.NewReader(markdown))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced {
			continue
		}
		if h := strings.TrimLeft(line, "#"); heading != "" && len(h) < len(line) && strings.HasPrefix(h, " ") {
			l := len(line) - len(h)
			switch {
			case strings.TrimSpace(h) == heading:
				in, level, found = true, l, true
			case in && l <= level:
				in = false
			}
		}
		if !in || !strings.HasPrefix(line, "|") {
			cur = nil
			continue
		}
		cells := splitRow(line)
		switch {
		case cur == nil:
			tables = append(tables, Table{Header: cells})
			cur = &tables[len(tables)-1]
		case len(cur.Rows) == 0 && isDelimiter(cells):
		default:
			cur.Rows = append(cur.Rows, cells)
		}
	}
	if !found {
		return nil, fmt.Errorf("no heading %q", heading)
	}
	return tables, sc.Err()
}

func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	inCode := false
	start := 0
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '`':
			inCode = !inCode
		case line[i] == '\\':
			i++
		case line[i] == '|' && !inCode:
			cells = append(cells, strings.TrimSpace(line[start:i]))
			start = i + 1
		}
	}
	return append(cells, strings.TrimSpace(line[start:]))
}

func isDelimiter(cells []string) bool {
	for _, c := range cells {
		if strings.Trim(c, ":-") != "" {
			return false
		}
	}
	return true
}

var (
	code       = regexp.MustCompile("`([^`]+)`")
	metricName = regexp.MustCompile("^`([a-zA-Z_:][a-zA-Z0-9_:]*)`$")
)

// Metrics returns the metrics the tables list, by name, with their label names sorted: rows whose
// first cell is a metric name in backticks, in tables with a column "labels". A label cell lists
// label names in backticks, then after ":" or "=" their values; ";" starts another label.
func Metrics(tables []Table) (map[string][]string, error) {
	metrics := map[string][]string{}
	for _, t := range tables {
		col := slices.IndexFunc(t.Header, func(h string) bool { return strings.EqualFold(h, "labels") })
		for _, row := range t.Rows {
			m := metricName.FindStringSubmatch(row[0])
			if m == nil {
				continue
			}
			if _, dup := metrics[m[1]]; dup {
				return nil, fmt.Errorf("%s listed twice", m[1])
			}
			if col < 0 || col >= len(row) {
				return nil, fmt.Errorf("%s: no labels cell", m[1])
			}
			labels := []string{}
			for part := range strings.SplitSeq(row[col], ";") {
				if i := strings.IndexAny(part, ":="); i >= 0 {
					part = part[:i]
				}
				for _, l := range code.FindAllStringSubmatch(part, -1) {
					labels = append(labels, l[1])
				}
			}
			slices.Sort(labels)
			metrics[m[1]] = labels
		}
	}
	return metrics, nil
}

// MetricsUnder is Metrics of the tables under heading.
func MetricsUnder(markdown []byte, heading string) (map[string][]string, error) {
	tables, err := Tables(markdown, heading)
	if err != nil {
		return nil, err
	}
	return Metrics(tables)
}

// Reasons returns the Event reasons the tables whose first column is "reason" list: every name in
// backticks in that column.
func Reasons(tables []Table) []string {
	var reasons []string
	for _, t := range tables {
		if len(t.Header) == 0 || t.Header[0] != "reason" {
			continue
		}
		for _, row := range t.Rows {
			for _, r := range code.FindAllStringSubmatch(row[0], -1) {
				reasons = append(reasons, r[1])
			}
		}
	}
	slices.Sort(reasons)
	return slices.Compact(reasons)
}

// Recorder is a prometheus.Registerer that keeps what is registered through it.
type Recorder struct {
	prometheus.Registerer
	Collectors []prometheus.Collector
}

// Register registers c and keeps it.
func (r *Recorder) Register(c prometheus.Collector) error {
	r.Collectors = append(r.Collectors, c)
	return r.Registerer.Register(c)
}

// MustRegister registers cs and keeps them.
func (r *Recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// descFields reads a Desc's name and variable labels from its String form, the only way
// client_golang gives them out.
var descFields = regexp.MustCompile(`^Desc\{fqName: "([^"]*)", .*, variableLabels: \{([^}]*)\}\}$`)

// Described returns the metrics cs describe, by name, with their label names sorted, whether or
// not they have series yet.
func Described(cs ...prometheus.Collector) (map[string][]string, error) {
	metrics := map[string][]string{}
	for _, c := range cs {
		ch := make(chan *prometheus.Desc)
		go func() {
			c.Describe(ch)
			close(ch)
		}()
		for d := range ch {
			m := descFields.FindStringSubmatch(d.String())
			if m == nil {
				return nil, fmt.Errorf("unreadable %s", d)
			}
			labels := []string{}
			if m[2] != "" {
				labels = strings.Split(m[2], ",")
			}
			slices.Sort(labels)
			metrics[m[1]] = labels
		}
	}
	return metrics, nil
}

// EmittedReasons returns the reasons of the Kubernetes Events that the module's non-test code under
// root records, read from its source: what a call of a method Eventf (events.EventRecorder's, whose
// fourth argument is the reason), or of a function of the same package that passes its parameter
// reason on to one, gives as the reason: a string literal or a constant of its package. Anything
// else is an error, a reason no test can list.
func EmittedReasons(root string) ([]string, error) {
	var reasons []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
			return filepath.SkipDir
		}
		found, err := packageReasons(path)
		reasons = append(reasons, found...)
		return err
	})
	slices.Sort(reasons)
	return slices.Compact(reasons), err
}

func packageReasons(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	// Files by package: a directory may hold a main package's files beside a build-tagged one's.
	pkgs := map[string][]*ast.File{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		pkgs[f.Name.Name] = append(pkgs[f.Name.Name], f)
	}
	var reasons []string
	for _, files := range pkgs {
		consts := map[string]string{}
		var funcs []*ast.FuncDecl
		for _, f := range files {
			for _, decl := range f.Decls {
				switch decl := decl.(type) {
				case *ast.GenDecl:
					if decl.Tok == token.CONST {
						for _, spec := range decl.Specs {
							vs := spec.(*ast.ValueSpec)
							for i, name := range vs.Names {
								if i < len(vs.Values) {
									if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
										consts[name.Name], _ = strconv.Unquote(lit.Value)
									}
								}
							}
						}
					}
				case *ast.FuncDecl:
					if decl.Body != nil {
						funcs = append(funcs, decl)
					}
				}
			}
		}
		// The functions that record Events, by name, with the position of their reason:
		// events.EventRecorder's Eventf, and the package's own that pass their parameter reason on
		// to one of them.
		recorders := map[string]int{"Eventf": 3}
		for grown := true; grown; {
			grown = false
			for _, fn := range funcs {
				if _, known := recorders[fn.Name.Name]; known {
					continue
				}
				if i := paramIndex(fn, "reason"); i >= 0 && passesOnReason(fn, recorders) {
					recorders[fn.Name.Name], grown = i, true
				}
			}
		}
		for _, fn := range funcs {
			var bad error
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				arg, ok := reasonArg(n, recorders)
				if !ok || bad != nil {
					return bad == nil
				}
				switch arg := arg.(type) {
				case *ast.BasicLit:
					if r, err := strconv.Unquote(arg.Value); err == nil && arg.Kind == token.STRING {
						reasons = append(reasons, r)
						return true
					}
				case *ast.Ident:
					if r, ok := consts[arg.Name]; ok {
						reasons = append(reasons, r)
						return true
					}
					if _, passes := recorders[fn.Name.Name]; passes && arg.Name == "reason" {
						return true
					}
				}
				bad = fmt.Errorf("%s: the reason of this Event is no string constant of its package", fset.Position(arg.Pos()))
				return false
			})
			if bad != nil {
				return nil, bad
			}
		}
	}
	return reasons, nil
}

// reasonArg is the reason n passes when it is a call of one of recorders.
func reasonArg(n ast.Node, recorders map[string]int) (ast.Expr, bool) {
	call, ok := n.(*ast.CallExpr)
	if !ok {
		return nil, false
	}
	var name string
	switch fun := call.Fun.(type) {
	case *ast.SelectorExpr:
		name = fun.Sel.Name
	case *ast.Ident:
		name = fun.Name
	}
	i, ok := recorders[name]
	if !ok || i >= len(call.Args) {
		return nil, false
	}
	return call.Args[i], true
}

// passesOnReason tells whether fn gives its parameter reason to one of recorders.
func passesOnReason(fn *ast.FuncDecl, recorders map[string]int) bool {
	passes := false
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if arg, ok := reasonArg(n, recorders); ok {
			if id, ok := arg.(*ast.Ident); ok && id.Name == "reason" {
				passes = true
			}
		}
		return !passes
	})
	return passes
}

// paramIndex is the position of fn's parameter called name, or -1.
func paramIndex(fn *ast.FuncDecl, name string) int {
	i := 0
	for _, field := range fn.Type.Params.List {
		for _, n := range field.Names {
			if n.Name == name {
				return i
			}
			i++
		}
		if len(field.Names) == 0 {
			i++
		}
	}
	return -1
}
