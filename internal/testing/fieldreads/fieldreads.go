// Package fieldreads finds, in the Go sources, which fields of a type some packages read: the
// reference side of the guard tests that hold a hand-kept list of fields (what a cache keeps of a
// pod, what a cache key leaves out) against the code that reads them, so that a field read in a new
// place fails the guard instead of waiting for a test that happens to exercise it. Only tests
// import it: it runs `go list` and type-checks the packages from their sources.
package fieldreads

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Read is one field read: the struct type, as package path and name ("k8s.io/api/core/v1.Pod"),
// and the field's name.
type Read struct{ Type, Field string }

// TypeName is t's name as a Read holds it.
func TypeName(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

// Of returns, with one place that reads it, every field of root's struct types (root and the named struct types its fields lead
// to) that the non-test code of pkgs reads, or any function of their module they call, directly
// or not. A read is a selector on a value of one of these types — a promoted field counts as the
// embedded field and the field — or a call of a GetX method of a type with a field X. Methods of
// other modules are not followed (DeepCopy, String): they see every field alike. Reads through a
// value of another type that embeds one of these (x.Image of a type embedding Container) are not
// counted: only the root's own types are the ones asked about.
func Of(tb testing.TB, root reflect.Type, pkgs ...string) map[Read]token.Position {
	tb.Helper()
	l, err := load(pkgs)
	if err != nil {
		tb.Fatalf("fieldreads: %v", err)
	}
	w := &walker{loader: l, types: closure(root), reads: map[Read]token.Position{}, done: map[string]bool{}}
	for _, p := range pkgs {
		src, err := l.check(p)
		if err != nil {
			tb.Fatalf("fieldreads: %v", err)
		}
		for _, f := range src.files {
			w.walk(src, f)
		}
	}
	for len(w.queue) > 0 {
		fn := w.queue[0]
		w.queue = w.queue[1:]
		src, err := l.check(fn.Pkg().Path())
		if err != nil {
			tb.Fatalf("fieldreads: %v", err)
		}
		// An interface's method has no declaration: nothing to follow.
		if decl := src.funcs[fn.FullName()]; decl != nil {
			w.walk(src, decl)
		}
	}
	return w.reads
}

// closure is the names of t's named struct types and of those its fields lead to.
func closure(t reflect.Type) map[string]bool {
	seen := map[string]bool{}
	var visit func(reflect.Type)
	visit = func(t reflect.Type) {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			visit(t.Elem())
		case reflect.Map:
			visit(t.Key())
			visit(t.Elem())
		case reflect.Struct:
			if t.Name() == "" || seen[TypeName(t)] {
				return
			}
			seen[TypeName(t)] = true
			for i := range t.NumField() {
				visit(t.Field(i).Type)
			}
		}
	}
	visit(t)
	return seen
}

// listed is what `go list -export` says of one package.
type listed struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
	Module     *struct{ Path string }
}

type loader struct {
	fset    *token.FileSet
	imp     types.Importer
	listed  map[string]*listed
	module  string
	checked map[string]*source
}

// source is a package of the module type-checked from its files.
type source struct {
	info  *types.Info
	files []*ast.File
	funcs map[string]*ast.FuncDecl // by types.Func.FullName
}

func load(pkgs []string) (*loader, error) {
	cmd := exec.Command("go", append([]string{"list", "-deps", "-export", "-json=ImportPath,Dir,Export,GoFiles,Module"}, pkgs...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.Join(err, errors.New(stderr.String()))
	}
	l := &loader{fset: token.NewFileSet(), listed: map[string]*listed{}, checked: map[string]*source{}}
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		p := &listed{}
		if err := dec.Decode(p); err != nil {
			return nil, err
		}
		l.listed[p.ImportPath] = p
	}
	root := l.listed[pkgs[0]]
	if root == nil || root.Module == nil {
		return nil, errors.New(pkgs[0] + ": not a package of a module")
	}
	l.module = root.Module.Path
	l.imp = importer.ForCompiler(l.fset, "gc", func(path string) (io.ReadCloser, error) {
		if p := l.listed[path]; p != nil && p.Export != "" {
			return os.Open(p.Export)
		}
		return nil, errors.New(path + ": no export data")
	})
	return l, nil
}

func (l *loader) inModule(pkg *types.Package) bool {
	p := l.listed[pkg.Path()]
	return p != nil && p.Module != nil && p.Module.Path == l.module
}

// check type-checks path from its sources, once.
func (l *loader) check(path string) (*source, error) {
	if s := l.checked[path]; s != nil {
		return s, nil
	}
	p := l.listed[path]
	if p == nil {
		return nil, errors.New(path + ": not listed")
	}
	s := &source{funcs: map[string]*ast.FuncDecl{}, info: &types.Info{
		Selections: map[*ast.SelectorExpr]*types.Selection{},
		Uses:       map[*ast.Ident]types.Object{},
		Defs:       map[*ast.Ident]types.Object{},
	}}
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(l.fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		s.files = append(s.files, f)
	}
	if _, err := (&types.Config{Importer: l.imp}).Check(path, l.fset, s.files, s.info); err != nil {
		return nil, err
	}
	for _, f := range s.files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				if fn, ok := s.info.Defs[fd.Name].(*types.Func); ok {
					s.funcs[fn.FullName()] = fd
				}
			}
		}
	}
	l.checked[path] = s
	return s, nil
}

type walker struct {
	*loader
	types map[string]bool
	reads map[Read]token.Position
	queue []*types.Func
	done  map[string]bool
}

// walk records the reads under n and queues the functions of the module it refers to.
func (w *walker) walk(src *source, n ast.Node) {
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if sel := src.info.Selections[n]; sel != nil {
				w.selection(sel, w.fset.Position(n.Sel.Pos()))
			}
		case *ast.Ident:
			if fn, ok := src.info.Uses[n].(*types.Func); ok && fn.Pkg() != nil && w.inModule(fn.Pkg()) {
				if fn = fn.Origin(); !w.done[fn.FullName()] {
					w.done[fn.FullName()] = true
					w.queue = append(w.queue, fn)
				}
			}
		}
		return true
	})
}

// selection records the fields sel, at pos, reads when its receiver is one of the types asked
// about.
func (w *walker) selection(sel *types.Selection, pos token.Position) {
	cur := named(sel.Recv())
	if cur == nil || !w.types[typeName(cur)] {
		return
	}
	path := sel.Index()
	if sel.Kind() != types.FieldVal {
		path = path[:len(path)-1]
	}
	for _, i := range path {
		st, ok := cur.Underlying().(*types.Struct)
		if !ok {
			return
		}
		f := st.Field(i)
		w.read(Read{typeName(cur), f.Name()}, pos)
		if cur = named(f.Type()); cur == nil {
			return
		}
	}
	if sel.Kind() == types.FieldVal {
		return
	}
	if field, ok := strings.CutPrefix(sel.Obj().Name(), "Get"); ok {
		if st, ok := cur.Underlying().(*types.Struct); ok {
			for i := range st.NumFields() {
				if st.Field(i).Name() == field {
					w.read(Read{typeName(cur), field}, pos)
				}
			}
		}
	}
}

func (w *walker) read(r Read, pos token.Position) {
	if _, ok := w.reads[r]; !ok {
		w.reads[r] = pos
	}
}

func named(t types.Type) *types.Named {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, _ := t.(*types.Named)
	return n
}

func typeName(n *types.Named) string {
	if n.Obj().Pkg() == nil {
		return n.Obj().Name()
	}
	return n.Obj().Pkg().Path() + "." + n.Obj().Name()
}
