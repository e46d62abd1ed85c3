package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/topdown"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/sidecarset/history"
)

// Decision queries, one per policy entry point (docs/design.md, "Decisions").
const (
	matchQuery     = "data.sidecarops.match.decision"
	explainQuery   = "data.sidecarops.explain.reasons"
	conflictQuery  = "data.sidecarops.conflict.violations"
	whitelistQuery = "data.sidecarops.whitelist.violations"
	governQuery    = "data.sidecarops.governance.findings"
)

// Engine holds the current Snapshot. The zero value has none; Swap installs one.
type Engine struct {
	cur atomic.Pointer[Snapshot]
}

// Current returns the snapshot in force, or nil before the first Swap.
func (e *Engine) Current() *Snapshot { return e.cur.Load() }

// Swap installs s; requests already holding the previous snapshot finish with it.
func (e *Engine) Swap(s *Snapshot) { e.cur.Store(s) }

// Snapshot is one immutable, prepared policy state.
type Snapshot struct {
	revision        string
	adminRevisions  []string
	sidecarSets     map[string]*v1beta1.SidecarSet
	revisions       history.Source
	revisionObjects []*appsv1.ControllerRevision
	podProjection   *projection
	// lastMatched is the last decision's matched lists (matchedLists), for the objects of
	// setObjects.
	lastMatched *atomic.Pointer[matchedLists]
	// delta, when set, holds the index rules compiled apart from match's (Compiler).
	delta         *delta
	deterministic bool
	match         *termQuery
	explain       *termQuery
	conflict      rego.PreparedEvalQuery
	whitelist     rego.PreparedEvalQuery
	govern        rego.PreparedEvalQuery
}

// prefixed names modules after the position of their bundle, which keeps two bundles' same-named
// files apart.
func prefixed(i int, modules map[string]*ast.Module) map[string]*ast.Module {
	out := make(map[string]*ast.Module, len(modules))
	for path, m := range modules {
		out[fmt.Sprintf("bundle%d/%s", i, strings.TrimPrefix(path, "/"))] = m
	}
	return out
}

func compile(modules map[string]*ast.Module) (*ast.Compiler, error) {
	compiler := ast.NewCompiler()
	if compiler.Compile(modules); compiler.Failed() {
		return nil, fmt.Errorf("engine: compiling policies: %w", compiler.Errors)
	}
	return compiler, nil
}

// prepare prepares every decision query of s on compiler and store.
func (s *Snapshot) prepare(ctx context.Context, compiler *ast.Compiler, store storage.Store) error {
	var err error
	if s.match, err = prepareTermQuery(compiler, store, matchQuery); err != nil {
		return err
	}
	if s.explain, err = prepareTermQuery(compiler, store, explainQuery); err != nil {
		return err
	}
	for _, q := range []struct {
		query string
		dst   *rego.PreparedEvalQuery
	}{{conflictQuery, &s.conflict}, {whitelistQuery, &s.whitelist}, {governQuery, &s.govern}} {
		pq, err := rego.New(rego.Query(q.query), rego.Compiler(compiler), rego.Store(store)).PrepareForEval(ctx)
		if err != nil {
			return fmt.Errorf("engine: preparing %s: %w", q.query, err)
		}
		*q.dst = pq
	}
	return nil
}

// withObjects returns a snapshot that decides exactly as s (same prepared queries) but hands out
// these SidecarSets and ControllerRevisions. It is only correct when they compile to s's bundle
// revision: the policies then read nothing that differs, while mutation reads the objects
// themselves (images, injectionStrategy.revision, status.latestRevision), which a bundle does not
// record. The loader uses it to skip the OPA compile for such changes.
func (s *Snapshot) withObjects(sidecarSets []*v1beta1.SidecarSet, revs []*appsv1.ControllerRevision) *Snapshot {
	c := *s
	c.setObjects(sidecarSets, revs)
	return &c
}

// sameObjects reports whether s hands out exactly these objects (by identity: the loader replaces an
// object whenever anything injection reads of it changes).
func (s *Snapshot) sameObjects(sidecarSets []*v1beta1.SidecarSet, revs []*appsv1.ControllerRevision) bool {
	if len(sidecarSets) != len(s.sidecarSets) || len(revs) != len(s.revisionObjects) {
		return false
	}
	for _, ss := range sidecarSets {
		if s.sidecarSets[ss.Name] != ss {
			return false
		}
	}
	return slices.Equal(revs, s.revisionObjects)
}

func (s *Snapshot) setObjects(sidecarSets []*v1beta1.SidecarSet, revs []*appsv1.ControllerRevision) {
	s.sidecarSets = make(map[string]*v1beta1.SidecarSet, len(sidecarSets))
	for _, ss := range sidecarSets {
		s.sidecarSets[ss.Name] = ss
	}
	s.revisions = history.NewStaticSource(revs...)
	s.revisionObjects = revs
	s.lastMatched = new(atomic.Pointer[matchedLists])
}

// Partial is how many SidecarSets' index rules the snapshot compiled apart from the others
// (Compiler): 0 normally; more after a change in a large fleet, until the Compiler folds them in.
func (s *Snapshot) Partial() int {
	if s.delta == nil {
		return 0
	}
	return s.delta.stale.Value.(ast.Set).Len()
}

// Revision is the compiled bundle's revision.
func (s *Snapshot) Revision() string { return s.revision }

// AdminRevisions are the revisions of the administrators' bundles, in load order.
func (s *Snapshot) AdminRevisions() []string { return s.adminRevisions }

// History is the snapshot's ControllerRevision history, for mutation.Input and validation.
func (s *Snapshot) History() history.Source { return s.revisions }

// Deterministic reports whether the snapshot's policies answer the same input the same way every
// time: none of their modules (administrators' included) calls a builtin OPA marks
// non-deterministic (time.now_ns, rand.intn, http.send, uuid.rfc4122, ...). Only then may a caller
// reuse a decision for an input it has seen.
func (s *Snapshot) Deterministic() bool { return s.deterministic }

// ReadsPod reports whether some policy of the snapshot may read the pod at path (object keys under
// input.pod): a caller may ignore a difference between two pods' JSON only where it does not.
func (s *Snapshot) ReadsPod(path ...string) bool { return s.podProjection.reads(path) }

// SidecarSet returns a SidecarSet of the snapshot by name. With it a Snapshot is a validation.Lookup.
func (s *Snapshot) SidecarSet(name string) (*v1beta1.SidecarSet, bool) {
	ss, ok := s.sidecarSets[name]
	return ss, ok
}

func checkRoots(bs []*bundle.Bundle) error {
	type owned struct {
		root   string
		bundle int
	}
	var roots []owned
	for i, b := range bs {
		rs := []string{""}
		if b.Manifest.Roots != nil {
			rs = *b.Manifest.Roots
		}
		for _, r := range rs {
			for _, o := range roots {
				if bundle.RootPathsOverlap(r, o.root) {
					return fmt.Errorf("engine: bundle %d root %q overlaps root %q of bundle %d (the compiled bundle owns %q)", i, r, o.root, o.bundle, bundles.Root)
				}
			}
			roots = append(roots, owned{r, i})
		}
	}
	return nil
}

// noMetrics spares each evaluation the timers OPA otherwise creates and nobody reads.
var noMetrics = metrics.NoOp()

// ctxCancel is the query's cancellation read from its context. Without an external one, OPA starts
// a goroutine per evaluation to wait on the context; the evaluator polls Cancelled before every
// expression anyway, so asking the context there stops the query at the same points, for free.
type ctxCancel struct{ ctx context.Context }

func (ctxCancel) Cancel() {}

func (c ctxCancel) Cancelled() bool { return c.ctx.Err() != nil }

// termQuery is a decision query whose value its callers read as OPA's AST, a few strings out of it,
// straight away: without the conversion into Go maps and slices rego's Eval does by default, which
// on the per-pod path was a large share of the decision's allocations (BenchmarkDecide). It is
// compiled once against a snapshot's policies and store, as rego's PrepareForEval compiles it, and
// evaluated by topdown itself: rego's PreparedEvalQuery made an evaluation context and a result set
// per evaluation, a tenth of the allocations of a pod's decision (BenchmarkPerPod).
type termQuery struct {
	body     ast.Body
	qc       ast.QueryCompiler
	compiler *ast.Compiler
	store    storage.Store
}

// termResult is the variable a termQuery binds the query's value to.
const termResult = ast.Var("__sidecarops_result__")

func prepareTermQuery(compiler *ast.Compiler, store storage.Store, query string) (*termQuery, error) {
	body, err := ast.ParseBody(string(termResult) + " = " + query)
	if err == nil {
		qc := compiler.QueryCompiler()
		if body, err = qc.Compile(body); err == nil {
			return &termQuery{body: body, qc: qc, compiler: compiler, store: store}, nil
		}
	}
	return nil, fmt.Errorf("engine: preparing %s: %w", query, err)
}

// eval evaluates q on in; nil means undefined.
func (q *termQuery) eval(ctx context.Context, in ast.Value) (*ast.Term, error) {
	st := evalStates.Get().(*evalState)
	st.cancel.ctx, st.input.Value = ctx, in
	defer st.release()
	txn, err := q.store.NewTransaction(ctx)
	if err != nil {
		return nil, err
	}
	defer q.store.Abort(ctx, txn)
	err = topdown.NewQuery(q.body).WithQueryCompiler(q.qc).WithCompiler(q.compiler).WithStore(q.store).WithTransaction(txn).
		WithInput(&st.input).WithVirtualCache(&st.cache).WithCancel(&st.cancel).WithMetrics(noMetrics).
		Iter(ctx, st.collect)
	t := st.result
	if t == &st.input { // a query whose value is its input: the term is the state's, reused
		t = ast.NewTerm(in)
	}
	return t, err
}

// evalState is what a termQuery gives an evaluation besides its input, reused by the next one: made
// per evaluation, it was four allocations of every pod's decision. Nothing of it outlives the
// evaluation: the result's terms are the evaluator's, which the cache only pointed to.
type evalState struct {
	cache  smallCache
	cancel ctxCancel
	input  ast.Term
	// collect keeps in result the first value of the query, as rego's Eval reads it.
	collect func(topdown.QueryResult) error
	result  *ast.Term
}

var evalStates = sync.Pool{New: func() any {
	st := &evalState{}
	st.cache.reset()
	st.collect = func(qr topdown.QueryResult) error {
		if st.result == nil {
			st.result = qr[termResult]
		}
		return nil
	}
	return st
}}

func (st *evalState) release() {
	st.cache.reset()
	st.cancel.ctx, st.input.Value, st.result = nil, nil, nil
	evalStates.Put(st)
}

// decode converts a decision value into a Go type through JSON; decisions are small.
func decode(v any, dst any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, dst)
}
