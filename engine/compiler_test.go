package engine

import (
	"context"
	"fmt"
	"maps"
	mathrand "math/rand/v2"
	"slices"
	"testing"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
)

// TestCompilerDecidesAsAWholeCompile is the Compiler's property test: a fleet larger than
// wholeIndexBelow goes through a random sequence of changes (selectors changed, SidecarSets
// paused, added and deleted, namespaces relabelled, other fields changed), and after each one the
// incremental snapshot decides every random pod exactly as a snapshot compiled from scratch, with
// the same revision. It also checks that the sequence took each of the Compiler's paths.
func TestCompilerDecidesAsAWholeCompile(t *testing.T) {
	ctx := context.Background()
	rnd := mathrand.New(mathrand.NewPCG(1, 2))
	apps := []string{"a", "b", "c", "d"}
	pick := func(xs []string) string { return xs[rnd.IntN(len(xs))] }
	newSet := func(i int) *v1beta1.SidecarSet {
		return sidecarSet(fmt.Sprintf("ss-%03d", i), map[string]string{"app": pick(apps)}, func(ss *v1beta1.SidecarSet) {
			ss.Spec.Containers[0].Name = fmt.Sprintf("c-%03d", i) // never colliding: every match injects
			switch rnd.IntN(4) {
			case 0:
				ss.Spec.NamespaceSelector = v1beta1.NamespaceNamed(pick([]string{"n1", "n2"}))
			case 1:
				ss.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": pick([]string{"prod", "dev"})}}
			}
		})
	}
	sets := map[int]*v1beta1.SidecarSet{}
	for i := range wholeIndexBelow + 40 {
		sets[i] = newSet(i)
	}
	namespaces := map[string]*corev1.Namespace{}
	relabel := func(name string) {
		namespaces[name] = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"env": pick([]string{"prod", "dev"})}}}
	}
	relabel("n1")
	relabel("n2")
	state := func() bundles.State {
		st := bundles.State{}
		for _, i := range slices.Sorted(maps.Keys(sets)) {
			st.SidecarSets = append(st.SidecarSets, sets[i])
		}
		for _, n := range []string{"n1", "n2"} {
			st.Namespaces = append(st.Namespaces, namespaces[n])
		}
		return st
	}

	var c Compiler
	paths := map[string]int{}
	var prev *Snapshot
	var prevBase *base
	for step := range 40 {
		if step > 0 {
			switch rnd.IntN(6) {
			case 0: // a new selector
				i := rnd.IntN(len(sets) + 10)
				sets[i] = newSet(i)
			case 1: // paused: its rule goes
				i := slices.Sorted(maps.Keys(sets))[rnd.IntN(len(sets))]
				ss := sets[i].DeepCopy()
				ss.Spec.InjectionStrategy.Paused = true
				sets[i] = ss
			case 2:
				delete(sets, slices.Sorted(maps.Keys(sets))[rnd.IntN(len(sets))])
			case 3: // namespaces are data: no rule changes
				relabel(pick([]string{"n1", "n2"}))
			case 4: // an image: neither rules nor data the policies read
				i := slices.Sorted(maps.Keys(sets))[rnd.IntN(len(sets))]
				ss := sets[i].DeepCopy()
				ss.Spec.Containers[0].Image = fmt.Sprintf("busybox:%d", step)
				sets[i] = ss
			case 5: // many at once: past deltaLimit, the base is compiled again
				for i := range deltaLimit + 1 {
					ss := newSet(i)
					ss.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}
					sets[i] = ss
				}
			}
		}
		st := state()
		s, err := c.Snapshot(ctx, st, nil)
		require.NoError(t, err)
		switch {
		case s == prev:
			paths["unchanged"]++
		case prev != nil && s.revision == prev.revision:
			paths["objects only"]++
		case c.base != prevBase:
			paths["whole"]++
		case s.delta == nil && prev.delta == nil, s.delta != nil && prev.delta != nil && s.delta.compiler == prev.delta.compiler:
			paths["data only"]++
		default:
			paths["delta"]++
		}
		prev, prevBase = s, c.base
		want := snapshot(t, st)
		require.Equal(t, want.Revision(), s.Revision(), "step %d", step)
		for range 20 {
			ns, labels := pick([]string{"n1", "n2", "n3"}), map[string]string{"app": pick(apps)}
			raw := podJSON(t, ns, labels)
			got, err := s.Decide(ctx, ns, raw)
			require.NoError(t, err)
			exp, err := want.Decide(ctx, ns, raw)
			require.NoError(t, err)
			require.Equal(t, exp.MatchedNames(), got.MatchedNames(), "step %d, pod %v in %s", step, labels, ns)
			for _, ss := range got.Matched {
				require.Same(t, sets[index(ss.Name)], ss, "the snapshot hands out the objects of the state")
			}
		}
	}
	t.Logf("paths taken: %v", paths)
	for _, path := range []string{"whole", "delta", "data only", "objects only"} {
		assert.Positive(t, paths[path], "path %q never taken: %v", path, paths)
	}
	assert.GreaterOrEqual(t, paths["whole"], 2, "a base compiled again after the first")
}

func index(name string) int {
	var i int
	_, _ = fmt.Sscanf(name, "ss-%d", &i)
	return i
}

// The Compiler's answers to repeated and small changes: the same snapshot when nothing changed, the
// same decisions with new objects when only what the policies do not read changed, and a new base
// only when administrators' modules change (a data-only bundle, like the ConfigMap's whitelist, is
// data).
func TestCompilerReuse(t *testing.T) {
	ctx := context.Background()
	log := sidecarSet("log", map[string]string{"app": "web"})
	st := bundles.State{SidecarSets: []*v1beta1.SidecarSet{log}}
	var c Compiler
	first, err := c.Snapshot(ctx, st, nil)
	require.NoError(t, err)
	again, err := c.Snapshot(ctx, bundles.State{SidecarSets: []*v1beta1.SidecarSet{log}}, nil)
	require.NoError(t, err)
	assert.Same(t, first, again, "nothing changed: the same snapshot")

	newer := log.DeepCopy()
	newer.Status.LatestRevision = "log-2"
	objects, err := c.Snapshot(ctx, bundles.State{SidecarSets: []*v1beta1.SidecarSet{newer}}, nil)
	require.NoError(t, err)
	assert.NotSame(t, first, objects)
	assert.Equal(t, first.Revision(), objects.Revision())
	got, ok := objects.SidecarSet("log")
	require.True(t, ok)
	assert.Same(t, newer, got, "mutation reads the new object")
	st.SidecarSets = []*v1beta1.SidecarSet{newer}

	base := c.base
	whitelist := bundles.DataBundle(bundles.WhitelistRoot, "w1", map[string]any{"rules": []any{}})
	_, err = c.Snapshot(ctx, st, []*bundle.Bundle{whitelist})
	require.NoError(t, err)
	assert.Same(t, base, c.base, "a data bundle is not compiled")

	g := adminBundle(t, gates)
	gated, err := c.Snapshot(ctx, st, []*bundle.Bundle{g, whitelist})
	require.NoError(t, err)
	assert.NotSame(t, base, c.base, "administrators' modules are compiled")
	d, err := gated.Decide(ctx, "kube-system", podJSON(t, "kube-system", map[string]string{"app": "web"}))
	require.NoError(t, err)
	assert.Equal(t, []string{"namespace kube-system is a system namespace"}, d.Denied)
	assert.Equal(t, []string{"gates-1", "w1"}, gated.AdminRevisions())

	broken := adminBundle(t, map[string]string{".manifest": `{"revision":"bad","roots":["gates"]}`, "gates/g.rego": "package gates\n\ndeny_injection contains x if x := data.nothing.f(1)\n"})
	_, err = c.Snapshot(ctx, st, []*bundle.Bundle{broken})
	require.Error(t, err)
	same, err := c.Snapshot(ctx, st, []*bundle.Bundle{g, whitelist})
	require.NoError(t, err)
	assert.Same(t, gated, same, "a failed compile changes nothing")
}

// Fold compiles a delta into the base: the snapshot it returns decides as the one before, with the
// same revision and objects, and has no delta left to evaluate per decision.
func TestCompilerFold(t *testing.T) {
	ctx := context.Background()
	var sets []*v1beta1.SidecarSet
	for i := range wholeIndexBelow {
		sets = append(sets, sidecarSet(fmt.Sprintf("ss-%03d", i), map[string]string{"app": fmt.Sprint(i % 7)}, func(ss *v1beta1.SidecarSet) {
			ss.Spec.Containers[0].Name = fmt.Sprintf("c-%03d", i)
		}))
	}
	var c Compiler
	st := bundles.State{SidecarSets: sets}
	_, err := c.Snapshot(ctx, st, nil)
	require.NoError(t, err)
	folded, err := c.Fold(ctx)
	require.NoError(t, err)
	assert.Nil(t, folded, "nothing to fold")

	changed := sets[3].DeepCopy()
	changed.Spec.Selector.MatchLabels["app"] = "web"
	st.SidecarSets = append(slices.Clone(sets[:3]), append([]*v1beta1.SidecarSet{changed}, sets[4:]...)...)
	partial, err := c.Snapshot(ctx, st, nil)
	require.NoError(t, err)
	require.Equal(t, 1, partial.Partial())
	folded, err = c.Fold(ctx)
	require.NoError(t, err)
	require.NotNil(t, folded)
	assert.Equal(t, 0, folded.Partial())
	assert.Equal(t, partial.Revision(), folded.Revision())
	for _, app := range []string{"web", "3", "0"} {
		raw := podJSON(t, "shop", map[string]string{"app": app})
		want, err := partial.Decide(ctx, "shop", raw)
		require.NoError(t, err)
		got, err := folded.Decide(ctx, "shop", raw)
		require.NoError(t, err)
		assert.Equal(t, want.Matched, got.Matched, "app=%s", app)
		assert.NotEmpty(t, got.Matched, "app=%s", app)
	}
	again, err := c.Snapshot(ctx, st, nil)
	require.NoError(t, err)
	assert.Same(t, folded, again, "the folded snapshot is the one in force")
}
