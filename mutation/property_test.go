package mutation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// gen draws pods and SidecarSets that exercise every injection feature together. Its only
// restrictions are the preconditions under which OpenKruise's injection is idempotent at all:
// sidecar names are unique and never equal app container names (validation and the conflict
// policy guarantee the first; a replaced app container would stop being an env or volume source,
// and of two same-named sidecars only one can replace the pod's copy), MergePatchJson values are
// canonical JSON without nulls (a value set verbatim is canonicalised by the next merge) on keys
// no other policy writes (the conflict policy forbids mixing Overwrite and MergePatchJson), and hot-upgrade sidecars have no resourcesPolicy (their twins
// are not excluded from the targets; see resources_test.go).
type gen struct{ r *rand.Rand }

func (g gen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }
func (g gen) chance(p float64) bool    { return g.r.Float64() < p }
func (g gen) n(most int) int           { return g.r.IntN(most + 1) }

var (
	genPaths   = []string{"/a", "/b", "/c", "/data", "/logs", "/dev/x", "/dev/y"}
	genVolumes = []string{"vol-a", "vol-b", "vol-c", "vol-d"}
	genEnvs    = []string{"E1", "E2", "E3", "POD_NAME"}
	genKeys    = []string{"k1", "k2", "team", "kruise.io/sidecarset-injected-list", "x/y~z"}
)

func (g gen) pod() *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{}}}
	for i := 0; i < 1+g.n(2); i++ {
		c := corev1.Container{Name: fmt.Sprintf("app-%d", i), Image: "app:1"}
		for j := 0; j < g.n(2); j++ {
			c.Env = append(c.Env, env(g.pick(genEnvs...), g.pick("1", "2")))
		}
		for j := 0; j < g.n(2); j++ {
			m := mount(g.pick(genVolumes...), g.pick(genPaths...))
			if g.chance(0.3) {
				m.SubPathExpr = "x/$(" + g.pick(genEnvs...) + ")"
			}
			c.VolumeMounts = append(c.VolumeMounts, m)
		}
		if g.chance(0.3) {
			c.VolumeDevices = append(c.VolumeDevices, device(g.pick(genVolumes...), g.pick(genPaths...)))
		}
		if g.chance(0.7) {
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(g.pick("100m", "1", "250m"))}
			c.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(g.pick("64Mi", "1Gi"))}
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
	}
	for i := 0; i < g.n(2); i++ {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: fmt.Sprintf("app-init-%d", i)})
	}
	for i := 0; i < g.n(2); i++ {
		p.Spec.Volumes = append(p.Spec.Volumes, volume(g.pick(genVolumes...)))
	}
	for i := 0; i < g.n(2); i++ {
		p.Spec.ImagePullSecrets = append(p.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: g.pick("s1", "s2", "s3")})
	}
	if g.chance(0.5) {
		p.Labels["src"] = "app-0"
	}
	if g.chance(0.5) {
		p.Annotations = map[string]string{}
		for i := 0; i < 1+g.n(2); i++ {
			p.Annotations[g.pick(genKeys...)] = g.pick("v", "")
			p.Annotations[g.pick("m1", "m2")] = g.pick(`{"a":1}`, `{"b":{"d":3}}`, "")
		}
	}
	return p
}

func (g gen) sidecar(name string, init bool) v1beta1.SidecarContainer {
	c := sc(name, "img-"+name+":1", v1beta1.PodInjectPolicyType(g.pick("BeforeAppContainer", "AfterAppContainer", "")))
	if init && g.chance(0.5) {
		always := corev1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
	}
	hot := (!init || c.RestartPolicy != nil) && g.chance(0.3)
	if hot {
		c.UpgradeStrategy = v1beta1.SidecarContainerUpgradeStrategy{UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "empty:1"}
	}
	for j := 0; j < g.n(2); j++ {
		c.Env = append(c.Env, env(g.pick(genEnvs...), "own"))
	}
	for j := 0; j < g.n(2); j++ {
		c.VolumeMounts = append(c.VolumeMounts, mount(g.pick(append(genVolumes, "ss-vol")...), g.pick(genPaths...)))
	}
	if g.chance(0.3) {
		c.VolumeDevices = append(c.VolumeDevices, device(g.pick(genVolumes...), g.pick(genPaths...)))
	}
	if g.chance(0.5) {
		c.ShareVolumePolicy.Type = v1beta1.ShareVolumePolicyEnabled
	}
	if g.chance(0.3) {
		c.ShareVolumeDevicePolicy = &v1beta1.ShareVolumePolicy{Type: v1beta1.ShareVolumePolicyType(g.pick("enabled", "disabled"))}
	}
	if g.chance(0.5) {
		t := v1beta1.TransferEnvVar{SourceContainerName: g.pick("app-0", "app-1", "missing"), EnvName: g.pick(genEnvs...)}
		if g.chance(0.3) {
			t.EnvNames = []string{g.pick(genEnvs...), g.pick(genEnvs...)}
		}
		if g.chance(0.3) {
			t.SourceContainerNameFrom = &v1beta1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{
				FieldPath: g.pick("metadata.labels['src']", "metadata.annotations['k1']", "metadata.name")}}
		}
		c.TransferEnv = append(c.TransferEnv, t)
	}
	if !hot && (!init || c.RestartPolicy != nil) && g.chance(0.3) {
		c.ResourcesPolicy = &v1beta1.ResourcesPolicy{
			TargetContainersMode: v1beta1.TargetContainersModeType(g.pick("sum", "max")), TargetContainersNameRegex: "^app-",
			ResourcesExpr: v1beta1.ResourcesExpr{
				Limits:   &v1beta1.ResourceExprLimits{CPU: "cpu*50%"},
				Requests: &v1beta1.ResourceExprRequests{Memory: "max(memory*10%, 16Mi)"},
			},
		}
	}
	return c
}

func (g gen) sidecarSets() []*v1beta1.SidecarSet {
	var out []*v1beta1.SidecarSet
	letters := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}
	g.r.Shuffle(len(letters), func(i, j int) { letters[i], letters[j] = letters[j], letters[i] })
	next := func() string { l := letters[0]; letters = letters[1:]; return l }
	for i := 0; i < g.n(3); i++ {
		ss := newSidecarSet(fmt.Sprintf("ss-%d", i), g.pick("h1", "h2", ""))
		if g.chance(0.5) {
			ss.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation] = g.pick("w1", "w2")
		}
		for j := 0; j < g.n(2); j++ {
			ss.Spec.InitContainers = append(ss.Spec.InitContainers, g.sidecar("init-"+next(), true))
		}
		for j := 0; j < g.n(2); j++ {
			ss.Spec.Containers = append(ss.Spec.Containers, g.sidecar("s"+next(), false))
		}
		for _, v := range append(genVolumes, "ss-vol") {
			if g.chance(0.5) {
				ss.Spec.Volumes = append(ss.Spec.Volumes, volume(v))
			}
		}
		if g.chance(0.5) {
			ss.Spec.ImagePullSecrets = secrets(g.pick("s1", "s4"), g.pick("s5", "s2"))
		}
		if g.chance(0.3) {
			ss.Status.LatestRevision = ss.Name + "-rev"
		}
		for j := 0; j < g.n(2); j++ {
			policy := v1beta1.SidecarSetPatchPolicyType(g.pick("", "Retain", "Overwrite", "MergePatchJson"))
			key, value := g.pick("k1", "k2", "k3"), g.pick("v1", "v2")
			if policy == v1beta1.SidecarSetMergePatchJsonPatchPolicy {
				key, value = g.pick("m1", "m2", "m3"), g.pick(`{"a":2}`, `{"b":{"c":1}}`)
			}
			ss.Spec.PatchPodMetadata = append(ss.Spec.PatchPodMetadata, v1beta1.SidecarSetPatchPodMetadata{
				Annotations: map[string]string{key: value}, PatchPolicy: policy})
		}
		out = append(out, ss)
	}
	return out
}

// TestInjectIdempotent checks inject(inject(p)) == inject(p), with a later clock, over generated
// inputs; every first injection's patch is also replayed against the original pod, which must be
// left as it was.
func TestInjectIdempotent(t *testing.T) {
	runs := 1000
	if testing.Short() {
		runs = 200
	}
	g := gen{rand.New(rand.NewPCG(1, 2))}
	first := fixedInjector()
	later := &Injector{Now: func() time.Time { return testNow.Add(24 * time.Hour) }, Rand: first.Rand}
	injected := 0
	for i := 0; i < runs; i++ {
		pod, sets := g.pod(), g.sidecarSets()
		before, setsBefore := mustJSON(t, pod), mustJSON(t, sets)
		res, err := first.Inject(Input{Pod: pod, SidecarSets: sets})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		// The result shares memory with the input pod; the input must still read as it did.
		if after := mustJSON(t, pod); !bytes.Equal(before, after) {
			t.Fatalf("run %d: the input pod was modified\nbefore: %s\nafter:  %s", i, before, after)
		}
		if len(res.Injected) > 0 {
			injected++
		}
		if msg := patchMismatch(t, pod, res); msg != "" {
			t.Fatalf("run %d: %s\npod: %s\nsets: %s", i, msg, mustJSON(t, pod), mustJSON(t, sets))
		}
		if msg := patchOnlyMismatch(t, first, Input{Pod: pod, SidecarSets: sets}, res); msg != "" {
			t.Fatalf("run %d: %s\npod: %s\nsets: %s", i, msg, mustJSON(t, pod), mustJSON(t, sets))
		}
		again, err := later.Inject(Input{Pod: res.Pod, SidecarSets: sets})
		if err != nil {
			t.Fatalf("run %d: re-inject: %v", i, err)
		}
		if a, b := mustJSON(t, res.Pod), mustJSON(t, again.Pod); !bytes.Equal(a, b) || len(again.Patch) != 0 {
			t.Fatalf("run %d: not idempotent\nfirst:  %s\nsecond: %s\npatch: %s\nsets: %s", i, a, b, mustJSON(t, again.Patch), mustJSON(t, sets))
		}
		// SidecarSets and what is prepared from them are shared with the manager's informer cache
		// (internal/loader holds its objects): no injection may write through them.
		prepared := make([]*Prepared, len(sets))
		for j, ss := range sets {
			prepared[j] = Prepare(ss)
		}
		for range 2 {
			shared, err := first.Inject(Input{Pod: pod, SidecarSets: sets, Prepared: prepared})
			if err != nil {
				t.Fatalf("run %d: with prepared SidecarSets: %v", i, err)
			}
			if a, b := mustJSON(t, res.Pod), mustJSON(t, shared.Pod); !bytes.Equal(a, b) {
				t.Fatalf("run %d: prepared SidecarSets inject another pod\nfresh:    %s\nprepared: %s", i, a, b)
			}
		}
		if after := mustJSON(t, sets); !bytes.Equal(setsBefore, after) {
			t.Fatalf("run %d: injection wrote into the SidecarSets\nbefore: %s\nafter:  %s", i, setsBefore, after)
		}
	}
	if injected < runs/2 {
		t.Fatalf("generator too weak: only %d of %d runs injected anything", injected, runs)
	}
}

// The generator must reach the features it claims to cover, or the property proves little.
func TestGeneratorCoverage(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(1, 2))}
	seen := map[string]bool{}
	for i := 0; i < 300; i++ {
		pod, sets := g.pod(), g.sidecarSets()
		res, err := fixedInjector().Inject(Input{Pod: pod, SidecarSets: sets})
		if err != nil {
			continue
		}
		b, _ := json.Marshal(res.Pod)
		for feature, needle := range map[string]string{
			"hot upgrade": v1beta1.SidecarSetWorkingHotUpgradeContainer, "native": `"restartPolicy":"Always"`,
			"subPathExpr": "subPathExpr", "devices": "volumeDevices", "merge patch": `\"a\":2`,
			"resources": `"cpu":"`, "controllerRevision": "controllerRevision", "secrets": "imagePullSecrets",
		} {
			if bytes.Contains(b, []byte(needle)) {
				seen[feature] = true
			}
		}
	}
	for _, f := range []string{"hot upgrade", "native", "subPathExpr", "devices", "merge patch", "resources", "controllerRevision", "secrets"} {
		if !seen[f] {
			t.Errorf("generator never produced %s", f)
		}
	}
}
