package injector

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/mutation"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

// cacheGen draws fleets and pods from small vocabularies, so that pods often match, collide, repeat
// (a ReplicaSet's burst: only name and uid differ) and sometimes cannot be injected.
type cacheGen struct{ r *rand.Rand }

func (g cacheGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g cacheGen) fleet(t *testing.T) []*v1beta1.SidecarSet {
	var sets []*v1beta1.SidecarSet
	for i := range 1 + g.r.IntN(5) {
		sets = append(sets, sidecarSet(t, fmt.Sprintf("ss-%d", i), g.pick("web", "db"), func(ss *v1beta1.SidecarSet) {
			c := &ss.Spec.Containers[0]
			if g.r.IntN(8) == 0 {
				c.Name = "shared" // collides with another SidecarSet's: one is withheld
			}
			if g.r.IntN(2) == 0 {
				c.ShareVolumePolicy.Type = v1beta1.ShareVolumePolicyEnabled
			}
			if g.r.IntN(3) == 0 {
				c.TransferEnv = []v1beta1.TransferEnvVar{{SourceContainerName: "app", EnvName: "LEVEL"}}
			}
			if g.r.IntN(3) == 0 {
				ss.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"patched": ss.Name}}}
			}
			if g.r.IntN(3) == 0 {
				ss.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{v1beta1.NamespaceNameLabel: "shop"}}
			}
			if g.r.IntN(10) == 0 {
				// A Partial revision draws at random (here: a revision nobody has, an injection error).
				ss.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{RevisionName: ptr.To("gone"), Policy: v1beta1.PartialSidecarSetInjectRevisionPolicy}
			}
		}))
	}
	return sets
}

// replica is a pod of template's ReplicaSet, or the template itself renamed: only its name,
// generateName and uid are its own.
func (g cacheGen) replica(template *corev1.Pod) *corev1.Pod {
	p := template.DeepCopy()
	p.UID = types.UID(fmt.Sprintf("uid-%d", g.r.IntN(1000)))
	switch g.r.IntN(4) {
	case 0:
		p.Name = fmt.Sprintf("p-%d", g.r.IntN(6))
	case 1, 2:
		p.GenerateName, p.Name = "web-", fmt.Sprintf("web-%d", g.r.IntN(1000))
	}
	return p
}

func (g cacheGen) pod() *corev1.Pod {
	p := pod(g.pick("shop", "dev", ""), map[string]string{"app": g.pick("web", "db", "api")}, func(p *corev1.Pod) {
		p.Name = ""
		if g.r.IntN(2) == 0 {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "LEVEL", Value: g.pick("info", "debug")}}
		}
		if g.r.IntN(3) == 0 {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "logs", MountPath: "/logs"}}
			p.Spec.Volumes = []corev1.Volume{{Name: "logs"}}
		}
		if g.r.IntN(4) == 0 {
			p.Annotations = map[string]string{"patched": "mine", v1beta1.SidecarSetHashAnnotation: `{"ss-0":{"hash":"old","sidecarSetName":"ss-0"}}`}
		}
	})
	return p
}

// ticking is a clock that moves 100 ms per reading, so that plans made in one second meet pods of
// the next, and a random source counting its draws.
type ticking struct {
	now   time.Time
	draws int
}

func (c *ticking) injector() *mutation.Injector {
	return &mutation.Injector{
		Now:  func() time.Time { c.now = c.now.Add(100 * time.Millisecond); return c.now },
		Rand: func() float64 { c.draws++; return 0.5 },
	}
}

// TestCacheChangesNothing: random fleets and pods through the path with and without a Cache (asked
// first by Answer, as the webhook does, then by Pod, for the patch alone or the pod too) give
// byte-identical patches and pods, the same
// answers, and the same readings of the clock and draws of the random source; and the cache does
// answer some of them.
func TestCacheChangesNothing(t *testing.T) {
	g := cacheGen{rand.New(rand.NewPCG(15, 15))}
	ctx := context.Background()
	fleets, pods := 24, 60
	if testing.Short() {
		fleets = 8
	}
	hits, answers := 0, 0
	for f := range fleets {
		// A gate vetoing a pod by name makes the name something a decision depends on; one calling
		// time.now_ns makes decisions unrepeatable, so that the cache must answer none.
		var admin []*bundle.Bundle
		switch f % 4 {
		case 1:
			admin = []*bundle.Bundle{gateBundle(t, `deny_injection contains "p-3 is vetoed" if input.pod.metadata.name == "p-3"`)}
		case 2:
			admin = []*bundle.Bundle{gateBundle(t, `deny_injection contains "odd second" if time.now_ns() < 0`)}
		}
		snap := snapshotOf(t, admin, g.fleet(t)...)
		plainClock := &ticking{now: time.Unix(1700000000, 0)}
		cachedClock := &ticking{now: plainClock.now}
		plain, cached := plainClock.injector(), cachedClock.injector()
		cache := &Cache{}
		patches := map[unsafe.Pointer]bool{}
		templates := []*corev1.Pod{g.pod(), g.pod(), g.pod()}
		for i := range pods {
			p := g.replica(templates[g.r.IntN(len(templates))])
			raw, err := json.Marshal(p)
			require.NoError(t, err)
			// The request's namespace is the pod's when the pod names none.
			ns := g.pick("shop", "dev")
			want, wantErr := Pod(ctx, snap, plain, PodRequest{Pod: p.DeepCopy(), Raw: raw, Decoded: true, Namespace: ns})
			// The webhook asks the cache before it decodes the pod; sidecarctl would go to Pod.
			var got PodResult
			var gotErr error
			answered, next := false, cached
			if g.r.IntN(2) == 0 {
				got, answered, next = cache.Answer(snap, cached, ns, raw)
			}
			// The webhook wants the patch alone; a cache's plans must serve either kind of request.
			patchOnly := g.r.IntN(2) == 0
			if answered {
				answers++
				got.Pod = want.Pod // the webhook does not read it; it is compared on the full path
			} else {
				got, gotErr = cache.Pod(ctx, snap, next, PodRequest{Pod: p.DeepCopy(), Raw: raw, Decoded: true, Namespace: ns, PatchOnly: patchOnly})
				if patchOnly && got.Outcome == Injected {
					require.Nil(t, got.Pod, "PatchOnly: no pod")
					got.Pod = want.Pod
				}
			}
			where := fmt.Sprintf("fleet %d pod %d: %s", f, i, raw)
			require.Equal(t, fmt.Sprint(wantErr), fmt.Sprint(gotErr), where)
			require.Equal(t, want.Outcome, got.Outcome, where)
			require.Equal(t, want.Namespace, got.Namespace, where)
			require.Equal(t, want.Matched, got.Matched, where)
			require.Equal(t, want.Denied, got.Denied, where)
			require.Equal(t, want.Withheld, got.Withheld, where)
			require.Equal(t, want.Injected, got.Injected, where)
			require.JSONEq(t, string(mustMarshal(t, want.Pod)), string(mustMarshal(t, got.Pod)), where)
			require.Equal(t, string(mustMarshal(t, want.Patch)), string(mustMarshal(t, got.Patch)), where)
			require.Equal(t, plainClock.now, cachedClock.now, "%s: the clock is read as often", where)
			require.Equal(t, plainClock.draws, cachedClock.draws, "%s: the random source is drawn as often", where)
			if len(got.Patch) > 0 {
				at := unsafe.Pointer(unsafe.SliceData(got.Patch))
				if patches[at] {
					hits++
				}
				patches[at] = true
			}
		}
	}
	t.Logf("of %d pods, %d patched from a plan, %d answered by Answer", fleets*pods, hits, answers)
	require.Greater(t, answers, fleets, "the generator must make the cache answer pods, or the property proves little")
	require.Greater(t, hits, fleets, "the generator must make the cache answer pods, or the property proves little")
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// A pod's key leaves out the values of the ignored fields, keeping whether they are empty, and
// reads as its String whether compared or hashed.
func TestPodKey(t *testing.T) {
	ignored := []string{"name", "generateName", "uid"}
	base := newPodKey(ignored, "shop", []byte(`{"metadata":{"uid":"u1","name":"a","generateName":"w-","labels":{"name":"x"}},"spec":{}}`))
	for _, tc := range []struct {
		name, ns, raw string
		same          bool
	}{
		{name: "other name and uid", ns: "shop", raw: `{"metadata":{"uid":"u2","name":"bb","generateName":"w-","labels":{"name":"x"}},"spec":{}}`, same: true},
		{name: "another label", ns: "shop", raw: `{"metadata":{"uid":"u1","name":"a","generateName":"w-","labels":{"name":"y"}},"spec":{}}`},
		{name: "no name", ns: "shop", raw: `{"metadata":{"uid":"u1","name":"","generateName":"w-","labels":{"name":"x"}},"spec":{}}`},
		{name: "another namespace", ns: "dev", raw: `{"metadata":{"uid":"u1","name":"a","generateName":"w-","labels":{"name":"x"}},"spec":{}}`},
		{name: "a prefix", ns: "shop", raw: `{"metadata":{"uid":"u1","name":"a","generateName":"w-","labels":{"name":"x"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newPodKey(ignored, tc.ns, []byte(tc.raw))
			require.Equal(t, tc.same, k.String() == base.String(), "%s\n%s", k.String(), base.String())
			require.Equal(t, tc.same, k.equal(base.String()))
			require.Equal(t, tc.same, base.equal(k.String()))
			require.True(t, k.equal(k.String()))
			if tc.same {
				require.Equal(t, base.sum(), k.sum())
			}
			// The fingerprint holds the namespace and labels: pods the key tells apart by them it
			// tells apart too, and pods with the same key it never does.
			differ := tc.ns != "shop" || tc.name == "another label"
			require.Equal(t, !differ, fingerprint(tc.ns, []byte(tc.raw)) == fingerprint("shop", base.raw))
		})
	}
	// Only the first member of a name is left out, as gjson.Get reads it.
	dup := func(first, second string) string {
		k := newPodKey(ignored, "shop", []byte(`{"metadata":{"name":"`+first+`","name":"`+second+`"}}`))
		return k.String()
	}
	require.Equal(t, dup("a", "z"), dup("b", "z"))
	require.NotEqual(t, dup("a", "y"), dup("a", "z"))
}

// A SidecarSet object changed in place after a snapshot was compiled from it serves the next
// snapshot as it is now: what a Cache prepared goes with the snapshot it prepared it for. (A
// program that decodes into the same object it compiled a snapshot from, as sidecarops' own
// migration test does, must not get the sidecars of before.)
func TestCachePreparesPerSnapshot(t *testing.T) {
	ctx := context.Background()
	ss := sidecarSet(t, "mesh", "web", func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].Image = "proxy:1" })
	cache := &Cache{}
	image := func(snap *engine.Snapshot) string {
		t.Helper()
		res, err := cache.Pod(ctx, snap, fixedInjector, PodRequest{Pod: pod("shop", map[string]string{"app": "web"})})
		require.NoError(t, err)
		require.Equal(t, Injected, res.Outcome)
		for _, c := range res.Pod.Spec.Containers {
			if c.Name == "mesh-c" {
				return c.Image
			}
		}
		t.Fatalf("no sidecar in %v", res.Pod.Spec.Containers)
		return ""
	}
	first := snapshotOf(t, nil, ss)
	require.Equal(t, "proxy:1", image(first))
	require.Equal(t, "proxy:1", image(first), "prepared once, the same for the next pod")

	changed := ss.DeepCopy() // what a snapshot holds is never modified: a change is a new object
	changed.Spec.Containers[0].Image = "proxy:2"
	require.NoError(t, defaults.SidecarSetAndHash(changed))
	require.Equal(t, "proxy:2", image(snapshotOf(t, nil, changed)))
}

// A Cache keys a pod only once its fingerprint has been seen, keeps a template's second pod, and after
// that only pods seen twice: a stream of pods that differ (in labels, or with the same labels but in
// their spec, as a DaemonSet's) costs it neither keys nor copies, and a ReplicaSet's third pod is
// answered from it, as before there were fingerprints.
func TestCacheKeepsTemplates(t *testing.T) {
	snap := snapshotOf(t, nil, sidecarSet(t, "mesh", "web"))
	raw := func(t *testing.T, name, hash, node string) []byte {
		t.Helper()
		b, err := json.Marshal(pod("shop", map[string]string{"app": "web", "hash": hash}, func(p *corev1.Pod) {
			p.Name, p.Spec.NodeName = name, node
		}))
		require.NoError(t, err)
		return b
	}
	dec := engine.Decision{Revision: "r"}
	type step struct {
		raw         []byte
		keyed, kept bool
		hit         bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a template's pods", []step{
			{raw: raw(t, "a", "1", ""), keyed: false},
			{raw: raw(t, "b", "1", ""), keyed: true, kept: true},
			{raw: raw(t, "c", "1", ""), keyed: true, hit: true},
		}},
		{"pods that differ in labels", []step{
			{raw: raw(t, "a", "1", "")}, {raw: raw(t, "b", "2", "")}, {raw: raw(t, "c", "3", "")},
		}},
		{"pods with the same labels that differ elsewhere", []step{
			{raw: raw(t, "a", "1", "n1")},
			{raw: raw(t, "b", "1", "n2"), keyed: true, kept: true}, // taken for a template's second pod
			{raw: raw(t, "c", "1", "n3"), keyed: true},
			{raw: raw(t, "d", "1", "n4"), keyed: true},
			{raw: raw(t, "e", "1", "n4"), keyed: true, kept: true}, // seen twice
			{raw: raw(t, "f", "1", "n4"), keyed: true, hit: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Cache{}
			for i, s := range tc.steps {
				k, e, ok := c.lookup(snap, "shop", s.raw)
				require.True(t, ok)
				require.Equal(t, s.keyed, k.keyed, "pod %d keyed", i)
				require.Equal(t, s.hit, e != nil, "pod %d answered", i)
				if e == nil {
					require.Equal(t, s.kept, c.store(snap, k, dec) != nil, "pod %d kept", i)
				}
			}
		})
	}
}
