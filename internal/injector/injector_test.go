package injector

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/testing/readonly"
	"github.com/sidecarops/sidecarops/mutation"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

var fixedInjector = &mutation.Injector{Now: func() time.Time { return time.Unix(1700000000, 0) }, Rand: func() float64 { return 0 }}

// sidecarSet is a defaulted, hashed SidecarSet selecting app=<app> with one container <name>-c.
func sidecarSet(t *testing.T, name, app string, mutate ...func(*v1beta1.SidecarSet)) *v1beta1.SidecarSet {
	t.Helper()
	ss := &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: name + "-c", Image: "busybox"}}},
		},
	}
	for _, m := range mutate {
		m(ss)
	}
	require.NoError(t, defaults.SidecarSetAndHash(ss))
	return ss
}

// gates is an administrators' bundle vetoing pods labelled block=yes.
func gates(t *testing.T) *bundle.Bundle {
	return gateBundle(t, `deny_injection contains "blocked by label" if input.pod.metadata.labels.block == "yes"`)
}

// gateBundle is an administrators' bundle of package gates with one rule, body.
func gateBundle(t *testing.T, body string) *bundle.Bundle {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".manifest"), []byte(`{"revision":"gates-1","roots":["gates"]}`), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "gates"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gates", "gates.rego"), []byte("package gates\n\n"+body+"\n"), 0o600))
	b, err := bundles.Read(dir, nil)
	require.NoError(t, err)
	return b
}

func snapshotOf(t *testing.T, admin []*bundle.Bundle, sets ...*v1beta1.SidecarSet) *engine.Snapshot {
	t.Helper()
	readonly.Guard(t, sets...)
	var c engine.Compiler
	snap, err := Snapshot(context.Background(), Policies{State: bundles.State{SidecarSets: sets}, Admin: admin, Compiler: &c})
	require.NoError(t, err)
	core, err := c.Bundle()
	require.NoError(t, err)
	require.Equal(t, core.Manifest.Revision, snap.Revision(), "the Compiler's bundle is the snapshot's")
	return snap
}

func pod(ns string, labels map[string]string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func TestPod(t *testing.T) {
	// missing points injectionStrategy.revision at a ControllerRevision nobody has: such a pod
	// cannot be injected (compat §1.5, quirk Q6).
	missing := func(ss *v1beta1.SidecarSet) {
		ss.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{RevisionName: ptr.To("gone-123")}
	}
	snap := snapshotOf(t, []*bundle.Bundle{gates(t)},
		sidecarSet(t, "log", "web"), sidecarSet(t, "mesh", "web"), sidecarSet(t, "broken", "pinned", missing))
	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		reqNS     string
		outcome   Outcome
		namespace string
		matched   []string
		injected  []string
		denied    []string
		injErr    bool
	}{
		{name: "two SidecarSets, in name order", pod: pod("shop", map[string]string{"app": "web"}), outcome: Injected,
			namespace: "shop", matched: []string{"log", "mesh"}, injected: []string{"log", "mesh"}},
		{name: "the request's namespace when the pod names none", pod: pod("", map[string]string{"app": "web"}), reqNS: "shop",
			outcome: Injected, namespace: "shop", matched: []string{"log", "mesh"}, injected: []string{"log", "mesh"}},
		{name: "default when neither names one (compat §1.12 step 2)", pod: pod("", map[string]string{"app": "web"}),
			outcome: Injected, namespace: "default", matched: []string{"log", "mesh"}, injected: []string{"log", "mesh"}},
		{name: "no SidecarSet selects it", pod: pod("shop", map[string]string{"app": "db"}), outcome: NotMatched, namespace: "shop"},
		{name: "a gate vetoes it", pod: pod("shop", map[string]string{"app": "web", "block": "yes"}), outcome: Gated,
			namespace: "shop", denied: []string{"blocked by label"}},
		{name: "finished", pod: pod("shop", map[string]string{"app": "web"}, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
			outcome: Inactive, namespace: "shop"},
		{name: "failed", pod: pod("shop", map[string]string{"app": "web"}, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
			outcome: Inactive, namespace: "shop"},
		{name: "being deleted", pod: pod("shop", map[string]string{"app": "web"}, func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }),
			outcome: Inactive, namespace: "shop"},
		{name: "the matched SidecarSet cannot be injected", pod: pod("shop", map[string]string{"app": "pinned"}),
			namespace: "shop", matched: []string{"broken"}, injErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.pod.DeepCopy()
			res, err := Pod(context.Background(), snap, fixedInjector, PodRequest{Pod: in, Namespace: tc.reqNS})
			assert.Equal(t, tc.namespace, res.Namespace)
			assert.Equal(t, tc.matched, orNil(res.Matched))
			assert.Equal(t, tc.denied, orNil(res.Denied))
			if tc.injErr {
				var ie *InjectionError
				require.ErrorAs(t, err, &ie)
				assert.Contains(t, err.Error(), "broken")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.outcome, res.Outcome)
			assert.Equal(t, tc.injected, orNil(res.Injected))
			if tc.outcome != Injected {
				assert.Empty(t, res.Patch)
				assert.Same(t, in, res.Pod, "a pod nothing is injected into is answered as it came")
				return
			}
			names := []string{}
			for _, c := range res.Pod.Spec.Containers {
				names = append(names, c.Name)
			}
			assert.ElementsMatch(t, []string{"app", "log-c", "mesh-c"}, names)
			assert.NotEmpty(t, res.Patch)
			assert.Len(t, in.Spec.Containers, 1, "the request's pod is not modified")
		})
	}
}

// The decision reads the bytes it is given, not a re-encoding of the decoded pod: the webhook
// passes what the API server sent.
func TestPodDecidesOnRaw(t *testing.T) {
	snap := snapshotOf(t, nil, sidecarSet(t, "log", "web"))
	res, err := Pod(context.Background(), snap, fixedInjector, PodRequest{
		Pod: pod("shop", map[string]string{"app": "db"}),
		Raw: []byte(`{"metadata":{"name":"p","namespace":"shop","labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"app"}]}}`),
	})
	require.NoError(t, err)
	assert.Equal(t, Injected, res.Outcome)
	assert.Equal(t, []string{"log"}, res.Matched)
}

func TestPodEngineError(t *testing.T) {
	snap := snapshotOf(t, nil, sidecarSet(t, "log", "web"))
	_, err := Pod(context.Background(), snap, fixedInjector, PodRequest{Pod: pod("shop", nil), Raw: []byte(`{not json`)})
	require.Error(t, err)
	var ie *InjectionError
	assert.False(t, errors.As(err, &ie), "a pod the engine cannot read is not an injection failure: %v", err)
}

func TestValidateSidecarSet(t *testing.T) {
	existing := sidecarSet(t, "log", "web")
	snap := snapshotOf(t, nil, existing)
	for _, tc := range []struct {
		name   string
		ss     *v1beta1.SidecarSet
		old    *v1beta1.SidecarSet
		fields []string
	}{
		{name: "valid", ss: sidecarSet(t, "mesh", "web")},
		{name: "defaulted first (decision D5): a volume without a source becomes an emptyDir", ss: func() *v1beta1.SidecarSet {
			ss := sidecarSet(t, "mesh", "web")
			ss.Spec.Volumes = []corev1.Volume{{Name: "v"}}
			return ss
		}()},
		{name: "single-object rules first: no selector", ss: func() *v1beta1.SidecarSet {
			ss := sidecarSet(t, "mesh", "web")
			ss.Spec.Selector = nil
			return ss
		}(), fields: []string{"spec.selector"}},
		{name: "then the policies: a container name another SidecarSet owns", ss: sidecarSet(t, "mesh", "web", func(ss *v1beta1.SidecarSet) {
			ss.Spec.Containers[0].Name = "log-c"
		}), fields: []string{"spec.containers[0].name"}},
		{name: "UPDATE: a collision the old version already had is not refused (decision D7)", ss: collidingMesh(t, "web", "mesh:2"), old: collidingMesh(t, "web", "mesh:1")},
		{name: "UPDATE: a new collision is", ss: collidingMesh(t, "web", "mesh:2"), old: collidingMesh(t, "db", "mesh:1"), fields: []string{"spec.containers[0].name"}},
		{name: "UPDATE: containers cannot be added (quirk Q2)", old: sidecarSet(t, "log", "web"), ss: sidecarSet(t, "log", "web", func(ss *v1beta1.SidecarSet) {
			ss.Spec.Containers = append(ss.Spec.Containers, v1beta1.SidecarContainer{Container: corev1.Container{Name: "extra", Image: "busybox"}})
		}), fields: []string{"spec.containers[1].name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs, err := ValidateSidecarSet(context.Background(), snap, tc.ss, tc.old)
			require.NoError(t, err)
			assert.Equal(t, tc.fields, fieldsOf(errs), "%v", errs)
		})
	}
}

// collidingMesh is SidecarSet mesh selecting app=<app> with a container named as log's.
func collidingMesh(t *testing.T, app, image string) *v1beta1.SidecarSet {
	return sidecarSet(t, "mesh", app, func(ss *v1beta1.SidecarSet) {
		ss.Spec.Containers[0].Name, ss.Spec.Containers[0].Image = "log-c", image
	})
}

// Two SidecarSets that collide on a pod (admitted at the same moment): the older injects, the newer
// is withheld, and the pod stays one the API server accepts.
func TestPodWithholdsTheNewerOfTwoColliding(t *testing.T) {
	at := func(sec int64) func(*v1beta1.SidecarSet) {
		return func(ss *v1beta1.SidecarSet) {
			ss.CreationTimestamp = metav1.Unix(sec, 0)
			ss.Spec.Containers[0].Name = "proxy"
		}
	}
	// "a" is the newer: the creation time decides before the name.
	snap := snapshotOf(t, nil, sidecarSet(t, "a", "web", at(20)), sidecarSet(t, "b", "web", at(10)), sidecarSet(t, "log", "web"))
	res, err := Pod(context.Background(), snap, fixedInjector, PodRequest{Pod: pod("shop", map[string]string{"app": "web"})})
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "log"}, res.Matched)
	assert.Equal(t, []engine.Withheld{{SidecarSet: "a", CollidesWith: "b"}}, res.Withheld)
	var names []string
	for _, c := range res.Pod.Spec.Containers {
		names = append(names, c.Name)
	}
	assert.ElementsMatch(t, []string{"proxy", "log-c", "app"}, names)
}

func TestConflictFinder(t *testing.T) {
	log := sidecarSet(t, "log", "web")
	log.UID, log.Generation = "uid-log", 2
	mesh := collidingMesh(t, "web", "mesh:1")
	mesh.UID, mesh.Generation = "uid-mesh", 1
	snaps := &staticSnapshot{snapshotOf(t, nil, log, mesh)}
	f := &ConflictFinder{Snapshots: snaps}
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		ss      *v1beta1.SidecarSet
		others  []string
		current bool
	}{
		{name: "held as it is", ss: log, others: []string{"mesh"}, current: true},
		{name: "a newer generation than held", ss: func() *v1beta1.SidecarSet { ss := log.DeepCopy(); ss.Generation = 3; return ss }()},
		{name: "another object of the same name", ss: func() *v1beta1.SidecarSet { ss := log.DeepCopy(); ss.UID = "uid-2"; return ss }()},
		{name: "not held yet", ss: sidecarSet(t, "new", "web")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			others, current, err := f.Conflicts(ctx, tc.ss)
			require.NoError(t, err)
			assert.Equal(t, tc.current, current)
			assert.Equal(t, tc.others, others)
		})
	}
	// Answers are kept per snapshot: the next one answers anew.
	others, current, err := f.Conflicts(ctx, log)
	require.NoError(t, err)
	assert.True(t, current)
	assert.Equal(t, []string{"mesh"}, others, "asked again of the same snapshot")
	snaps.s = snapshotOf(t, nil, log)
	others, current, err = f.Conflicts(ctx, log)
	require.NoError(t, err)
	assert.True(t, current)
	assert.Empty(t, others, "mesh is gone from the snapshot in force")

	others, current, err = (&ConflictFinder{Snapshots: staticSnapshot{}}).Conflicts(ctx, log)
	require.NoError(t, err)
	assert.False(t, current, "no snapshot loaded yet")
	assert.Empty(t, others)
}

type staticSnapshot struct{ s *engine.Snapshot }

func (s staticSnapshot) Current() *engine.Snapshot { return s.s }

// orNil makes "none" one value: the decision answers empty lists, the table writes nil.
func orNil(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func fieldsOf(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field)
	}
	return out
}

func TestSnapshotWhitelistFallback(t *testing.T) {
	owned := bundles.DataBundle(bundles.WhitelistRoot, "admin", map[string]any{"rules": []any{}})
	for _, tc := range []struct {
		name   string
		admin  []*bundle.Bundle
		called bool
	}{
		{name: "no administrators' bundle: the ConfigMap's whitelist", called: true},
		{name: "a bundle without the whitelist root (gates): the ConfigMap's whitelist", admin: []*bundle.Bundle{gates(t)}, called: true},
		{name: "a bundle owns the whitelist root: the ConfigMap is not read", admin: []*bundle.Bundle{owned}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			called := false
			snap, err := Snapshot(context.Background(), Policies{
				State: bundles.State{SidecarSets: []*v1beta1.SidecarSet{sidecarSet(t, "log", "web")}},
				Admin: tc.admin,
				Whitelist: func() (*bundle.Bundle, error) {
					called = true
					return bundles.DataBundle(bundles.WhitelistRoot, "configmap", map[string]any{"rules": []any{}}), nil
				},
			})
			require.NoError(t, err)
			assert.Equal(t, tc.called, called)
			assert.Equal(t, tc.called, NeedsWhitelist(tc.admin))
			want := []string{}
			for _, b := range tc.admin {
				want = append(want, b.Manifest.Revision)
			}
			if tc.called {
				want = append(want, "configmap")
			}
			assert.Equal(t, want, append([]string{}, snap.AdminRevisions()...))
		})
	}
	t.Run("the ConfigMap's error is the snapshot's", func(t *testing.T) {
		_, err := Snapshot(context.Background(), Policies{Whitelist: func() (*bundle.Bundle, error) { return nil, errors.New("bad ConfigMap") }})
		require.EqualError(t, err, "bad ConfigMap")
	})
}

// With a Compiler, Snapshot answers the Compiler's snapshot: the same one again when nothing
// changed.
func TestSnapshotWithCompiler(t *testing.T) {
	sets := []*v1beta1.SidecarSet{sidecarSet(t, "log", "web")}
	var c engine.Compiler
	p := Policies{State: bundles.State{SidecarSets: sets}, Compiler: &c}
	first, err := Snapshot(context.Background(), p)
	require.NoError(t, err)
	again, err := Snapshot(context.Background(), p)
	require.NoError(t, err)
	assert.Same(t, first, again)
	whole := snapshotOf(t, nil, sets...)
	assert.Equal(t, whole.Revision(), first.Revision(), "one Compiler's revision is another's")
}

// The patch applies to the pod as it arrived, also when its JSON lacks spec or metadata entirely or
// has them null (a fuzz input: the decoded pod has them empty, and the patch added below /spec to a document
// without /spec). The API server always sends both; the webhook must not answer a patch that does
// not apply to what anyone else sends.
func TestPodPatchAppliesToWhatArrived(t *testing.T) {
	snap := snapshotOf(t, nil, sidecarSet(t, "log", "web"), sidecarSet(t, "anything", "", func(ss *v1beta1.SidecarSet) {
		ss.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpDoesNotExist}}}
	}))
	for name, raw := range map[string]string{
		"no spec":     `{"metadata":{"name":"p","namespace":"shop","labels":{"app":"web"}}}`,
		"empty spec":  `{"metadata":{"name":"p","namespace":"shop","labels":{"app":"web"}},"spec":{}}`,
		"no metadata": `{"spec":{"containers":[{"name":"app","image":"app"}]}}`,
		"neither":     `{}`,
		// Issue 28, item 9: null decodes as absent, but a patch cannot add below it.
		"null spec":      `{"metadata":{"name":"p","namespace":"shop","labels":{"app":"web"}},"spec":null}`,
		"null metadata":  `{"metadata":null,"spec":{"containers":[{"name":"app","image":"app"}]}}`,
		"both null":      `{"metadata":null,"spec":null}`,
		"a complete pod": `{"metadata":{"name":"p","namespace":"shop","labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"app"}]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			var p corev1.Pod
			require.NoError(t, json.Unmarshal([]byte(raw), &p))
			res, err := Pod(context.Background(), snap, fixedInjector, PodRequest{Pod: &p, Raw: []byte(raw), Namespace: "shop"})
			require.NoError(t, err)
			require.Equal(t, Injected, res.Outcome)
			ops, err := json.Marshal(res.Patch)
			require.NoError(t, err)
			patch, err := jsonpatch.DecodePatch(ops)
			require.NoError(t, err)
			out, err := patch.Apply([]byte(raw))
			require.NoError(t, err, "the patch applies to the pod's own JSON")
			var got corev1.Pod
			require.NoError(t, json.Unmarshal(out, &got))
			want := res.Pod.DeepCopy()
			want.Namespace = got.Namespace // defaulted for the decision, never patched
			assert.Equal(t, want.Spec, got.Spec)
			assert.Equal(t, want.Annotations, got.Annotations)
		})
	}
}
