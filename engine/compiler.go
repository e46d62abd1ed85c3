package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/policies"
)

// deltaQuery is the decision of the index rules compiled alone (Compiler).
const (
	deltaPackage = "sidecarops.delta"
	deltaQuery   = "data." + deltaPackage + ".matches"
)

// When the whole index is recompiled instead of only the changed SidecarSets' rules: compiling the
// rules of wholeIndexBelow SidecarSets costs about what compiling a delta does, and a delta of more
// than deltaLimit SidecarSets costs a fraction of compiling 10,000 (BenchmarkRecompile; docs/benchmarks.md,
// "Policy compiles").
const (
	wholeIndexBelow = 256
	deltaLimit      = 256
)

// Compiler prepares a snapshot for each state the policy loader hands it, recompiling only what
// changed since the previous one. The policies and the index of every SidecarSet's rules are
// compiled into a base; the data (SidecarSets' documents, Namespaces, ControllerRevisions, the
// whitelist) is not compiled at all but put in a new store made mostly of values converted for
// earlier snapshots (bundles.Builder). When the rules of a few SidecarSets of a large fleet change,
// only their rules are compiled, into a delta module that DecideInput evaluates before the match
// decision, which then reads the base's index without them (data.sidecarops.match.applicable). The
// base is recompiled whole when administrators' modules change or the delta grows past deltaLimit.
//
// A Compiler is not safe for concurrent use.
type Compiler struct {
	builder bundles.Builder
	static  map[string]*ast.Module // the embedded policies, parsed once
	base    *base
	last    *Snapshot // the snapshot Snapshot (or Fold) returned last
	lastIn  []*bundle.Bundle
	store   storage.Store  // of last
	build   *bundles.Build // of last
}

// base is the compiled policies: ours, administrators' and the index of rules.
type base struct {
	compiler *ast.Compiler
	admin    []*bundle.Bundle // the administrators' bundles with modules compiled in
	rules    map[string]string
	// What a snapshot's ReadsPod and Deterministic answer, worked out once: walking the modules of
	// 10,000 SidecarSets' rules costs as much as the rest of a small change.
	projection    *projection
	deterministic bool
}

// Snapshot prepares the snapshot of st with the administrators' bundles admin (verified, in load
// order). When nothing the snapshot holds changed since the last call it returns the very same
// snapshot, so a caller can tell there is nothing to swap. On error the Compiler is as it was.
func (c *Compiler) Snapshot(ctx context.Context, st bundles.State, admin []*bundle.Bundle) (*Snapshot, error) {
	if err := checkRoots(append([]*bundle.Bundle{coreRoots}, admin...)); err != nil {
		return nil, err
	}
	build, err := c.builder.Build(st)
	if err != nil {
		return nil, err
	}
	if c.last != nil && c.last.revision == build.Revision && slices.Equal(c.lastIn, admin) {
		// The policies read nothing that differs; mutation reads the objects themselves.
		if c.last.sameObjects(st.SidecarSets, st.ControllerRevisions) {
			return c.last, nil
		}
		c.last = c.last.withObjects(st.SidecarSets, st.ControllerRevisions)
		return c.last, nil
	}
	data, err := storeData(build.Data, admin)
	if err != nil {
		return nil, err
	}
	b := c.base
	withModules := modular(admin)
	if b == nil || !slices.Equal(b.admin, withModules) || !deltaFits(b.rules, build.Rules) {
		if b, err = c.compileBase(withModules, build.Rules); err != nil {
			return nil, err
		}
	}
	store := inmem.NewFromObjectWithOpts(data, inmem.OptReturnASTValuesOnRead(true))
	s := &Snapshot{revision: build.Revision, adminRevisions: revisions(admin)}
	delta, err := c.compileDelta(b.rules, build.Rules, store)
	if err != nil {
		return nil, err
	}
	s.podProjection, s.deterministic = b.projection, b.deterministic
	if delta != nil && delta.compiler != nil {
		// Generated rules call no non-deterministic builtin, but they read the pod.
		s.podProjection = podProjection(b.projection, delta.compiler.Modules)
	}
	if err := s.prepare(ctx, b.compiler, store); err != nil {
		return nil, err
	}
	s.delta = delta
	s.setObjects(st.SidecarSets, st.ControllerRevisions)
	c.base, c.last, c.lastIn, c.store, c.build = b, s, slices.Clone(admin), store, build
	return s, nil
}

// Bundle is the compiled bundle of the state of the last snapshot (not the administrators'
// bundles), every rule in its index: what `sidecarctl compile` writes for stock opa.
func (c *Compiler) Bundle() (*bundle.Bundle, error) {
	if c.build == nil {
		return nil, fmt.Errorf("engine: nothing compiled yet")
	}
	return c.build.Bundle()
}

// Fold compiles the last snapshot's delta into a new base and returns the snapshot that decides
// with it alone: the same revision, objects and data, without the delta's cost per decision. It
// returns nil when the last snapshot has no delta. The policy loader folds once changes have
// stopped for a while, so a burst of changes costs one whole compile, later, and none on its path.
func (c *Compiler) Fold(ctx context.Context) (*Snapshot, error) {
	if c.last == nil || c.last.delta == nil {
		return nil, nil
	}
	b, err := c.compileBase(c.base.admin, c.build.Rules)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{revision: c.last.revision, adminRevisions: c.last.adminRevisions,
		podProjection: b.projection, deterministic: b.deterministic}
	if err := s.prepare(ctx, b.compiler, c.store); err != nil {
		return nil, err
	}
	s.sidecarSets, s.revisions, s.revisionObjects, s.lastMatched = c.last.sidecarSets, c.last.revisions, c.last.revisionObjects, c.last.lastMatched
	c.base, c.last = b, s
	return s, nil
}

// coreRoots stands for the compiled bundle in the roots check.
var coreRoots = &bundle.Bundle{Manifest: bundle.Manifest{Roots: &[]string{bundles.Root}}}

// deltaFits reports whether the rules that differ between the base and now are few enough to be
// compiled alone.
func deltaFits(base, now map[string]string) bool {
	if len(now) < wholeIndexBelow {
		return len(changedRules(base, now)) == 0
	}
	return len(changedRules(base, now)) <= deltaLimit
}

// changedRules names the SidecarSets whose rules differ between base and now, deleted ones included.
func changedRules(base, now map[string]string) []string {
	var out []string
	for name, r := range now {
		if b, ok := base[name]; !ok || b != r {
			out = append(out, name)
		}
	}
	for name := range base {
		if _, ok := now[name]; !ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func (c *Compiler) compileBase(admin []*bundle.Bundle, rules map[string]string) (*base, error) {
	modules, err := c.policies()
	if err != nil {
		return nil, err
	}
	index, err := bundles.ParseModules(map[string]string{bundles.IndexModulePath: bundles.IndexModule(bundles.IndexPackage, rules)})
	if err != nil {
		return nil, err
	}
	maps.Copy(modules, prefixed(0, index))
	for i, b := range admin {
		for _, m := range b.Modules {
			modules[fmt.Sprintf("bundle%d%s", i+1, m.Path)] = m.Parsed
		}
	}
	compiler, err := compile(modules)
	if err != nil {
		return nil, err
	}
	pod, err := podModules(compiler.Modules)
	if err != nil {
		return nil, err
	}
	return &base{compiler: compiler, admin: admin, rules: rules,
		projection: podProjection(nil, pod), deterministic: deterministic(pod)}, nil
}

// policies returns the embedded policies, parsed once per Compiler, under the names Prepare gives
// the compiled bundle's modules. The map is new on every call.
func (c *Compiler) policies() (map[string]*ast.Module, error) {
	if c.static == nil {
		parsed, err := bundles.ParseModules(policies.Modules())
		if err != nil {
			return nil, err
		}
		c.static = prefixed(0, parsed)
	}
	return maps.Clone(c.static), nil
}

// delta is the index rules of the SidecarSets that changed since the base, compiled alone.
type delta struct {
	stale    *ast.Term // the set of their names: the base's rules for them are out of date
	rules    map[string]string
	compiler *ast.Compiler // nil when no rule is left (only removals): nothing can be fresh
	query    *termQuery
}

// compileDelta compiles the rules that differ between base and now, unless the previous snapshot's
// delta holds the very same ones (a change to data only): then only the query is prepared again,
// on the new store.
func (c *Compiler) compileDelta(base, now map[string]string, store storage.Store) (*delta, error) {
	changed := changedRules(base, now)
	if len(changed) == 0 {
		return nil, nil
	}
	names := make([]*ast.Term, len(changed))
	rules := map[string]string{}
	for i, name := range changed {
		names[i] = ast.StringTerm(name)
		if now[name] != "" {
			rules[name] = now[name]
		}
	}
	d := &delta{stale: ast.SetTerm(names...), rules: rules}
	if prev := c.lastDelta(); prev != nil && prev.stale.Equal(d.stale) && maps.Equal(prev.rules, rules) {
		d.compiler = prev.compiler
	} else if len(rules) > 0 {
		static, err := c.policies()
		if err != nil {
			return nil, err
		}
		parsed, err := bundles.ParseModules(map[string]string{"delta.rego": bundles.IndexModule(deltaPackage, rules)})
		if err != nil {
			return nil, err
		}
		if d.compiler, err = compile(map[string]*ast.Module{"delta": parsed["delta.rego"], "labels": static["bundle0/"+policies.PathPrefix+"labels.rego"]}); err != nil {
			return nil, err
		}
	}
	if d.compiler == nil {
		return d, nil
	}
	var err error
	if d.query, err = prepareTermQuery(d.compiler, store, deltaQuery); err != nil {
		return nil, err
	}
	return d, nil
}

func (c *Compiler) lastDelta() *delta {
	if c.last == nil {
		return nil
	}
	return c.last.delta
}

// The keys of the delta's input, made once, as keyNamespace and keyPod.
var (
	keyIndex = ast.StringTerm("index")
	keyStale = ast.StringTerm("stale")
	keyFresh = ast.StringTerm("fresh")
)

// input adds to a match input what the match policy needs to read the base's index with the delta:
// input.index.stale and, evaluated on this input, input.index.fresh.
func (d *delta) input(ctx context.Context, in ast.Value) (ast.Value, error) {
	fresh := ast.NewSet()
	if d.query != nil {
		t, err := d.query.eval(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("engine: %s: %w", deltaQuery, err)
		}
		if t != nil {
			names, ok := t.Value.(ast.Set)
			if !ok {
				return nil, fmt.Errorf("engine: %s: want a set, got %v", deltaQuery, t)
			}
			for _, n := range names.Slice() {
				if _, ok := n.Value.(ast.String); !ok {
					return nil, fmt.Errorf("engine: %s: want strings, got %v", deltaQuery, n)
				}
				fresh.Add(n)
			}
		}
	}
	obj, ok := in.(ast.Object)
	if !ok {
		return nil, fmt.Errorf("engine: match input: want an object, got %T", in)
	}
	out := obj.Copy()
	out.Insert(keyIndex, ast.ObjectTerm(ast.Item(keyStale, d.stale), ast.Item(keyFresh, ast.NewTerm(fresh))))
	return out, nil
}

// storeData is the data the policies read: the build's and the administrators' bundles', whose
// roots are disjoint (checkRoots).
func storeData(core ast.Object, admin []*bundle.Bundle) (map[string]any, error) {
	merged := core
	for i, b := range admin {
		v, err := ast.InterfaceToValue(b.Data)
		if err != nil {
			return nil, fmt.Errorf("engine: bundle %d: data: %w", i+1, err)
		}
		obj, ok := v.(ast.Object)
		if !ok {
			return nil, fmt.Errorf("engine: bundle %d: data: want an object", i+1)
		}
		if merged, ok = merged.Merge(obj); !ok {
			return nil, fmt.Errorf("engine: bundle %d: a data key is defined by two bundles", i+1)
		}
	}
	out := make(map[string]any, merged.Len())
	merged.Foreach(func(k, v *ast.Term) {
		out[string(k.Value.(ast.String))] = v.Value
	})
	return out, nil
}

// modular lists the bundles that carry modules: only a change of those needs a new base.
func modular(bs []*bundle.Bundle) []*bundle.Bundle {
	var out []*bundle.Bundle
	for _, b := range bs {
		if len(b.Modules) > 0 {
			out = append(out, b)
		}
	}
	return out
}

func revisions(bs []*bundle.Bundle) []string {
	out := make([]string, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.Manifest.Revision)
	}
	return out
}
