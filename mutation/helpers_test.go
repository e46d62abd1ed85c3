package mutation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/sidecarset/history"
)

// Fixtures restating compat §4 "P1" and "SS1"; every test copies them before changing anything.

var testNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

const testNowJSON = "2026-03-04T05:06:07Z"

func fixedInjector() *Injector {
	return &Injector{Now: func() time.Time { return testNow }, Rand: func() float64 { return 0.5 }}
}

func env(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

func injectedEnv() corev1.EnvVar { return env(v1beta1.SidecarEnvInjected, "true") }

func mount(volume, path string) corev1.VolumeMount {
	return corev1.VolumeMount{Name: volume, MountPath: path}
}

func device(volume, path string) corev1.VolumeDevice {
	return corev1.VolumeDevice{Name: volume, DevicePath: path}
}

func volume(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

func secrets(names ...string) []corev1.LocalObjectReference {
	out := make([]corev1.LocalObjectReference, 0, len(names))
	for _, n := range names {
		out = append(out, corev1.LocalObjectReference{Name: n})
	}
	return out
}

// podP1 is compat §4 "P1".
func podP1() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "test-pod", Namespace: "default",
			Labels: map[string]string{"app": "suxing-test"},
		},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init-0", Image: "busybox:1.0.0"}},
			Containers: []corev1.Container{{
				Name: "nginx", Image: "nginx:1.15.1",
				Env:          []corev1.EnvVar{env("hello1", "world1"), env("hello2", "world2")},
				VolumeMounts: []corev1.VolumeMount{mount("volume-a", "/a/b"), mount("volume-b", "/e/f")},
			}},
			Volumes: []corev1.Volume{volume("volume-a"), volume("volume-b")},
		},
	}
}

func newSidecarSet(name, hash string) *v1beta1.SidecarSet {
	ss := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
	if hash != "" {
		ss.Annotations[v1beta1.SidecarSetHashAnnotation] = hash
	}
	ss.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "suxing-test"}}
	return ss
}

func sc(name, image string, policy v1beta1.PodInjectPolicyType) v1beta1.SidecarContainer {
	return v1beta1.SidecarContainer{Container: corev1.Container{Name: name, Image: image}, PodInjectPolicy: policy}
}

// ss1 is compat §4 "SS1".
func ss1() *v1beta1.SidecarSet {
	ss := newSidecarSet("sidecarset1", "c4k2dbb95d")
	ss.Spec.InitContainers = []v1beta1.SidecarContainer{
		sc("init-2", "busybox:1.0.0", ""),
		sc("init-1", "busybox:1.0.0", ""),
	}
	ss.Spec.Containers = []v1beta1.SidecarContainer{
		sc("dns-f", "dns-f-image:1.0", v1beta1.BeforeAppContainerType),
		sc("log-agent", "log-agent-image:1.0", v1beta1.AfterAppContainerType),
	}
	return ss
}

func names(cs []corev1.Container) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func volumeNames(vs []corev1.Volume) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, v.Name)
	}
	return out
}

func mountPaths(ms []corev1.VolumeMount) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.MountPath)
	}
	return out
}

func findContainer(t *testing.T, cs []corev1.Container, name string) corev1.Container {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q in %v", name, names(cs))
	return corev1.Container{}
}

func mustEqual(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %#v\nwant %#v", what, got, want)
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}

// canonical re-encodes JSON so two documents compare equal exactly when they hold the same values
// (object key order is the only thing it forgets).
func canonical(t testing.TB, b []byte) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return mustJSON(t, v)
}

// checkPatch applies res.Patch to the original pod's JSON with an independent RFC 6902
// implementation and demands exactly the JSON of res.Pod.
func checkPatch(t testing.TB, orig *corev1.Pod, res Result) {
	t.Helper()
	if err := patchMismatch(t, orig, res); err != "" {
		t.Fatal(err)
	}
}

func patchMismatch(t testing.TB, orig *corev1.Pod, res Result) string {
	t.Helper()
	origJSON := mustJSON(t, orig)
	patch, err := jsonpatch.DecodePatch(mustJSON(t, res.Patch))
	if err != nil {
		return "decode patch: " + err.Error()
	}
	got, err := patch.Apply(origJSON)
	if err != nil {
		return "apply patch " + string(mustJSON(t, res.Patch)) + ": " + err.Error()
	}
	want := mustJSON(t, res.Pod)
	if g, w := canonical(t, got), canonical(t, want); !bytes.Equal(g, w) {
		return "patched original differs from Result.Pod\npatch: " + string(mustJSON(t, res.Patch)) +
			"\n got: " + string(g) + "\nwant: " + string(w)
	}
	return ""
}

// patchOnlyMismatch injects in again with PatchOnly and demands no pod, the caller's pod as it was,
// and the very patch of res, byte for byte: the webhook's patch must not depend on whether the pod
// is built. inj must give the
// same clock reading and random draws twice.
func patchOnlyMismatch(t testing.TB, inj *Injector, in Input, res Result) string {
	t.Helper()
	in.PatchOnly = true
	before := mustJSON(t, in.Pod)
	only, err := inj.Inject(in)
	if err != nil {
		return "PatchOnly: " + err.Error()
	}
	if only.Pod != nil {
		return "PatchOnly returned a pod"
	}
	// PatchOnly plans against the caller's pod itself, not a copy: it must write nothing into it.
	if after := mustJSON(t, in.Pod); !bytes.Equal(before, after) {
		return "PatchOnly wrote into the caller's pod\nbefore: " + string(before) + "\nafter:  " + string(after)
	}
	if a, b := mustJSON(t, res.Patch), mustJSON(t, only.Patch); !bytes.Equal(a, b) {
		return "PatchOnly gave another patch\n full: " + string(a) + "\n only: " + string(b)
	}
	if !slices.Equal(res.Injected, only.Injected) {
		return fmt.Sprintf("PatchOnly injected %v, not %v", only.Injected, res.Injected)
	}
	return ""
}

func staticRevisions(crs ...*appsv1.ControllerRevision) history.Source {
	return history.NewStaticSource(crs...)
}
