package mutation

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/sidecarset/history"
)

// injectCase is one row of the behaviour tables. Every successful row is also checked for: the
// patch reproducing Result.Pod from the original, inputs left untouched, and idempotence
// (re-injecting the result, one hour later, changes nothing).
type injectCase struct {
	name    string
	pod     *corev1.Pod
	sets    []*v1beta1.SidecarSet
	revs    history.Source
	rand    func() float64
	wantErr []string // substrings of the error; nil means success
	check   func(t *testing.T, res Result)
	// notIdempotent, when set, says why re-injecting this result may legitimately differ.
	notIdempotent string
}

func runInjectCases(t *testing.T, cases []injectCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inj := fixedInjector()
			if tc.rand != nil {
				inj.Rand = tc.rand
			}
			podBefore, setsBefore := mustJSON(t, tc.pod), mustJSON(t, tc.sets)
			res, err := inj.Inject(Input{Pod: tc.pod, SidecarSets: tc.sets, History: tc.revs})
			if !bytes.Equal(podBefore, mustJSON(t, tc.pod)) || !bytes.Equal(setsBefore, mustJSON(t, tc.sets)) {
				t.Fatal("Inject modified its input")
			}
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("want error containing %q, got none", tc.wantErr)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Inject: %v", err)
			}
			checkPatch(t, tc.pod, res)
			if msg := patchOnlyMismatch(t, inj, Input{Pod: tc.pod, SidecarSets: tc.sets, History: tc.revs}, res); msg != "" {
				t.Error(msg)
			}
			if tc.check != nil {
				tc.check(t, res)
			}

			if tc.notIdempotent != "" {
				return
			}
			later := &Injector{Now: func() time.Time { return testNow.Add(time.Hour) }, Rand: inj.Rand}
			again, err := later.Inject(Input{Pod: res.Pod, SidecarSets: tc.sets, History: tc.revs})
			if err != nil {
				t.Fatalf("re-inject: %v", err)
			}
			if len(again.Patch) != 0 {
				t.Errorf("re-injecting the result is not a no-op: %s", mustJSON(t, again.Patch))
			}
		})
	}
}

func opsSummary(ops []jsonpatch.JsonPatchOperation) []string {
	out := make([]string, 0, len(ops))
	for _, o := range ops {
		out = append(out, o.Operation+" "+o.Path)
	}
	return out
}

func upgradeJSON(name, hash string, list []string, revision string) string {
	s := upgradeSpec{UpdateTimestamp: metav1.NewTime(testNow), Hash: hash, SidecarSetName: name, SidecarList: list, ControllerRevision: revision}
	b, _ := json.Marshal(s)
	return string(b)
}

func TestInjectBasics(t *testing.T) {
	runInjectCases(t, []injectCase{
		{
			name: "W15 SS1 on P1: placement, sorted init containers, IS_INJECTED, annotations",
			pod:  podP1(), sets: []*v1beta1.SidecarSet{ss1()},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "containers", names(res.Pod.Spec.Containers), []string{"dns-f", "nginx", "log-agent"})
				mustEqual(t, "initContainers", names(res.Pod.Spec.InitContainers), []string{"init-0", "init-1", "init-2"})
				for _, c := range res.Pod.Spec.InitContainers[1:] {
					mustEqual(t, c.Name+" env", c.Env, []corev1.EnvVar{injectedEnv()})
				}
				for _, n := range []string{"dns-f", "log-agent"} {
					mustEqual(t, n+" env", findContainer(t, res.Pod.Spec.Containers, n).Env, []corev1.EnvVar{injectedEnv()})
				}
				mustEqual(t, "nginx untouched", res.Pod.Spec.Containers[1], podP1().Spec.Containers[0])
				mustEqual(t, "annotations", res.Pod.Annotations, map[string]string{
					v1beta1.SidecarSetHashAnnotation: `{"sidecarset1":{"updateTimestamp":"` + testNowJSON +
						`","hash":"c4k2dbb95d","sidecarSetName":"sidecarset1","sidecarList":["dns-f","log-agent"]}}`,
					v1beta1.SidecarSetHashWithoutImageAnnotation: `{"sidecarset1":{"updateTimestamp":"` + testNowJSON +
						`","hash":"","sidecarSetName":"sidecarset1","sidecarList":["dns-f","log-agent"]}}`,
					v1beta1.SidecarSetListAnnotation: "sidecarset1",
				})
				mustEqual(t, "patch", opsSummary(res.Patch), []string{
					"add /spec/initContainers/-", "add /spec/initContainers/-",
					"add /spec/containers/-", "add /spec/containers/0",
					"add /metadata/annotations",
				})
				mustEqual(t, "injected", res.Injected, []string{"sidecarset1"})
			},
		},
		{
			name: "no SidecarSets: unchanged, empty patch",
			pod:  podP1(),
			check: func(t *testing.T, res Result) {
				mustEqual(t, "pod", res.Pod, podP1())
				if res.Patch == nil || len(res.Patch) != 0 {
					t.Errorf("want empty non-nil patch, got %#v", res.Patch)
				}
			},
		},
		{
			name: "succeeded pod is not injected",
			pod:  func() *corev1.Pod { p := podP1(); p.Status.Phase = corev1.PodSucceeded; return p }(),
			sets: []*v1beta1.SidecarSet{ss1()},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "containers", names(res.Pod.Spec.Containers), []string{"nginx"})
				mustEqual(t, "patch", len(res.Patch), 0)
			},
		},
		{
			name: "failed pod is not injected",
			pod:  func() *corev1.Pod { p := podP1(); p.Status.Phase = corev1.PodFailed; return p }(),
			sets: []*v1beta1.SidecarSet{ss1()},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "patch", len(res.Patch), 0)
			},
		},
		{
			name: "terminating pod is not injected",
			pod: func() *corev1.Pod {
				p := podP1()
				ts := metav1.NewTime(testNow)
				p.DeletionTimestamp = &ts
				return p
			}(),
			sets: []*v1beta1.SidecarSet{ss1()},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "patch", len(res.Patch), 0)
				mustEqual(t, "injected", len(res.Injected), 0)
			},
		},
		{
			name: "pod with existing annotations gets per-key operations, escaped",
			pod: func() *corev1.Pod {
				p := podP1()
				p.Annotations = map[string]string{"team": "a", v1beta1.SidecarSetListAnnotation: "other"}
				return p
			}(),
			sets: []*v1beta1.SidecarSet{ss1()},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "annotation ops", opsSummary(res.Patch)[4:], []string{
					"add /metadata/annotations/kruise.io~1sidecarset-hash",
					"add /metadata/annotations/kruise.io~1sidecarset-hash-without-image",
					"replace /metadata/annotations/kruise.io~1sidecarset-injected-list",
				})
				mustEqual(t, "list", res.Pod.Annotations[v1beta1.SidecarSetListAnnotation], "other,sidecarset1")
				mustEqual(t, "kept", res.Pod.Annotations["team"], "a")
			},
		},
	})
}

func TestInjectImagePullSecrets(t *testing.T) {
	withSecrets := func(ss, pod []corev1.LocalObjectReference) injectCase {
		p := podP1()
		p.Spec.ImagePullSecrets = pod
		s := ss1()
		s.Spec.ImagePullSecrets = ss
		return injectCase{pod: p, sets: []*v1beta1.SidecarSet{s}}
	}
	secretNames := func(res Result) []string {
		var out []string
		for _, s := range res.Pod.Spec.ImagePullSecrets {
			out = append(out, s.Name)
		}
		return out
	}
	w2 := withSecrets(secrets("s0", "s1", "s2"), secrets("s2", "s3", "s3"))
	w2.name = "W2 pod duplicates collapse, shared secret not repeated"
	w2.check = func(t *testing.T, res Result) {
		mustEqual(t, "secrets", secretNames(res), []string{"s2", "s3", "s0", "s1"})
		if !contains(opsSummary(res.Patch), "replace /spec/imagePullSecrets") {
			t.Errorf("want the list replaced whole, got %v", opsSummary(res.Patch))
		}
	}
	w3a := withSecrets(secrets("s0", "s1", "s2"), secrets("s3", "s4", "s5"))
	w3a.name = "W3 disjoint secrets add up to 6"
	w3a.check = func(t *testing.T, res Result) {
		mustEqual(t, "secrets", secretNames(res), []string{"s3", "s4", "s5", "s0", "s1", "s2"})
	}
	w3b := withSecrets(secrets("s0", "s1", "s2"), nil)
	w3b.name = "W3 pod without secrets gets the SidecarSet's 3"
	w3b.check = func(t *testing.T, res Result) {
		mustEqual(t, "secrets", secretNames(res), []string{"s0", "s1", "s2"})
		if !contains(opsSummary(res.Patch), "add /spec/imagePullSecrets") {
			t.Errorf("want the absent list added, got %v", opsSummary(res.Patch))
		}
	}
	w3c := withSecrets(nil, secrets("s3", "s4", "s5"))
	w3c.name = "W3 SidecarSet without secrets keeps the pod's 3"
	w3c.check = func(t *testing.T, res Result) {
		mustEqual(t, "secrets", secretNames(res), []string{"s3", "s4", "s5"})
		for _, op := range res.Patch {
			if strings.HasPrefix(op.Path, pathImagePullSecrets) {
				t.Errorf("unexpected op %s %s", op.Operation, op.Path)
			}
		}
	}
	runInjectCases(t, []injectCase{w2, w3a, w3b, w3c})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestInjectPatchPodMetadata(t *testing.T) {
	w5 := func() []*v1beta1.SidecarSet {
		a := ss1()
		a.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{
			{Annotations: map[string]string{"key1": `{"log-agent":1}`}, PatchPolicy: v1beta1.SidecarSetMergePatchJsonPatchPolicy},
			{Annotations: map[string]string{"key": "envoy=1,log=2"}, PatchPolicy: v1beta1.SidecarSetRetainPatchPolicy},
		}
		b := newSidecarSet("sidecarset2", "x")
		b.Spec.Containers = []v1beta1.SidecarContainer{sc("envoy", "envoy:1", v1beta1.AfterAppContainerType)}
		b.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{
			{Annotations: map[string]string{"key1": `{"envoy":2}`}, PatchPolicy: v1beta1.SidecarSetMergePatchJsonPatchPolicy},
		}
		return []*v1beta1.SidecarSet{a, b}
	}
	onlyPatches := func(policy v1beta1.SidecarSetPatchPolicyType, ann map[string]string) *v1beta1.SidecarSet {
		// A SidecarSet that injects nothing: only its metadata patch reaches the pod, as when
		// OpenKruise's buildSidecars returns no containers.
		ss := newSidecarSet("meta", "")
		ss.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{Annotations: ann, PatchPolicy: policy}}
		return ss
	}
	badMerge := ss1()
	badMerge.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{
		{Annotations: map[string]string{"ok": "x"}},
		{Annotations: map[string]string{"key1": `{"a":`}, PatchPolicy: v1beta1.SidecarSetMergePatchJsonPatchPolicy},
	}
	podWith := func(ann map[string]string) *corev1.Pod { p := podP1(); p.Annotations = ann; return p }

	runInjectCases(t, []injectCase{
		{
			name: "W5 MergePatchJson from two SidecarSets, Retain",
			pod:  podP1(), sets: w5(),
			check: func(t *testing.T, res Result) {
				mustEqual(t, "key1", res.Pod.Annotations["key1"], `{"envoy":2,"log-agent":1}`)
				mustEqual(t, "key", res.Pod.Annotations["key"], "envoy=1,log=2")
			},
		},
		{
			name: "S14 Retain and Overwrite on a pod without annotations",
			pod:  podP1(),
			sets: []*v1beta1.SidecarSet{func() *v1beta1.SidecarSet {
				ss := onlyPatches(v1beta1.SidecarSetRetainPatchPolicy, map[string]string{"key1": "value1"})
				ss.Spec.PatchPodMetadata = append(ss.Spec.PatchPodMetadata, v1beta1.SidecarSetPatchPodMetadata{
					Annotations: map[string]string{"key2": "value2"}, PatchPolicy: v1beta1.SidecarSetOverwritePatchPolicy})
				return ss
			}()},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "annotations", res.Pod.Annotations, map[string]string{"key1": "value1", "key2": "value2"})
				mustEqual(t, "patch", opsSummary(res.Patch), []string{"add /metadata/annotations"})
				mustEqual(t, "injected", len(res.Injected), 0)
			},
		},
		{
			name: "S15 Retain keeps, Overwrite replaces",
			pod:  podWith(map[string]string{"key1": "old", "key2": "old"}),
			sets: []*v1beta1.SidecarSet{func() *v1beta1.SidecarSet {
				ss := onlyPatches(v1beta1.SidecarSetRetainPatchPolicy, map[string]string{"key1": "value1"})
				ss.Spec.PatchPodMetadata = append(ss.Spec.PatchPodMetadata, v1beta1.SidecarSetPatchPodMetadata{
					Annotations: map[string]string{"key2": "value2"}, PatchPolicy: v1beta1.SidecarSetOverwritePatchPolicy})
				return ss
			}()},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "annotations", res.Pod.Annotations, map[string]string{"key1": "old", "key2": "value2"})
				mustEqual(t, "patch", opsSummary(res.Patch), []string{"replace /metadata/annotations/key2"})
			},
		},
		{
			name: "S16 MergePatchJson merges, keeps, and sets absent keys",
			pod:  podWith(map[string]string{"key1": `{"log-agent":1}`, "key2": `{"log-agent":1}`}),
			sets: []*v1beta1.SidecarSet{onlyPatches(v1beta1.SidecarSetMergePatchJsonPatchPolicy, map[string]string{
				"key1": `{"log-agent":1}`, "key2": `{"envoy":2}`, "key3": `{"probe":5}`})},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "annotations", res.Pod.Annotations, map[string]string{
					"key1": `{"log-agent":1}`, "key2": `{"envoy":2,"log-agent":1}`, "key3": `{"probe":5}`})
				mustEqual(t, "patch", opsSummary(res.Patch), []string{
					"replace /metadata/annotations/key2", "add /metadata/annotations/key3"})
			},
		},
		{
			name: "S17 a merge that changes nothing gives an empty patch",
			pod:  podWith(map[string]string{"key1": `{"log-agent":1}`}),
			sets: []*v1beta1.SidecarSet{onlyPatches(v1beta1.SidecarSetMergePatchJsonPatchPolicy, map[string]string{"key1": `{"log-agent":1}`})},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "patch", len(res.Patch), 0)
			},
		},
		{
			name:    "invalid merge JSON names SidecarSet, entry and key",
			pod:     podWith(map[string]string{"key1": `{"x":1}`}),
			sets:    []*v1beta1.SidecarSet{badMerge},
			wantErr: []string{`"sidecarset1"`, "spec.patchPodMetadata[1].annotations[key1]"},
		},
		{
			name:    "invalid existing pod value is an error when merging",
			pod:     podWith(map[string]string{"key1": `not json`}),
			sets:    []*v1beta1.SidecarSet{onlyPatches(v1beta1.SidecarSetMergePatchJsonPatchPolicy, map[string]string{"key1": `{"a":1}`})},
			wantErr: []string{`"meta"`, "spec.patchPodMetadata[0].annotations[key1]"},
		},
		{
			name:    "scalar merge patch is refused, as OpenKruise's json-patch refuses it",
			pod:     podWith(map[string]string{"key1": `{"x":1}`}),
			sets:    []*v1beta1.SidecarSet{onlyPatches(v1beta1.SidecarSetMergePatchJsonPatchPolicy, map[string]string{"key1": `5`})},
			wantErr: []string{"annotations[key1]", "JSON object or array"},
		},
		{
			name:          "MergePatchJson on an absent key sets the value verbatim (no validation, as OpenKruise)",
			pod:           podP1(),
			notIdempotent: "the next injection merges into the invalid value and fails, as OpenKruise's webhook would",
			sets:          []*v1beta1.SidecarSet{onlyPatches(v1beta1.SidecarSetMergePatchJsonPatchPolicy, map[string]string{"key1": `not json`})},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "key1", res.Pod.Annotations["key1"], "not json")
			},
		},
		{
			name: "injection overrides a metadata patch of its own annotations",
			pod:  podP1(),
			sets: []*v1beta1.SidecarSet{func() *v1beta1.SidecarSet {
				ss := ss1()
				ss.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{
					Annotations: map[string]string{v1beta1.SidecarSetListAnnotation: "zeta"}, PatchPolicy: v1beta1.SidecarSetOverwritePatchPolicy}}
				return ss
			}()},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "list", res.Pod.Annotations[v1beta1.SidecarSetListAnnotation], "sidecarset1,zeta")
			},
		},
	})
}

func TestInjectHashAnnotations(t *testing.T) {
	legacy := func() *corev1.Pod {
		p := podP1()
		p.Annotations = map[string]string{
			v1beta1.SidecarSetHashAnnotation:             `{"sidecarset-test":"old-hash"}`,
			v1beta1.SidecarSetHashWithoutImageAnnotation: `{"sidecarset-test":"old-without-image"}`,
		}
		return p
	}
	ss2 := newSidecarSet("sidecarset2", "c4k2dbb95d")
	ss2.Spec.Containers = []v1beta1.SidecarContainer{sc("dns-f", "dns-f-image:1.0", v1beta1.BeforeAppContainerType)}
	ss3 := newSidecarSet("sidecarset3", "gm967682cm")
	ss3.Spec.Containers = []v1beta1.SidecarContainer{sc("log-agent", "log-agent-image:1.0", v1beta1.AfterAppContainerType)}

	runInjectCases(t, []injectCase{
		{
			name: "W17 legacy flat hash annotations are read and rewritten structured",
			pod:  legacy(), sets: []*v1beta1.SidecarSet{ss1()},
			check: func(t *testing.T, res Result) {
				for _, key := range []string{v1beta1.SidecarSetHashAnnotation, v1beta1.SidecarSetHashWithoutImageAnnotation} {
					var specs map[string]upgradeSpec
					if err := json.Unmarshal([]byte(res.Pod.Annotations[key]), &specs); err != nil {
						t.Fatalf("%s is not structured: %v", key, err)
					}
					if got := specs["sidecarset-test"]; got.SidecarSetName != "sidecarset-test" || !strings.HasPrefix(got.Hash, "old-") {
						t.Errorf("%s lost the legacy entry: %+v", key, got)
					}
					if specs["sidecarset1"].SidecarSetName != "sidecarset1" {
						t.Errorf("%s lacks sidecarset1: %s", key, res.Pod.Annotations[key])
					}
				}
				mustEqual(t, "legacy entry, structured", res.Pod.Annotations[v1beta1.SidecarSetHashAnnotation],
					`{"sidecarset-test":{"updateTimestamp":null,"hash":"old-hash","sidecarSetName":"sidecarset-test","sidecarList":null},`+
						`"sidecarset1":`+upgradeJSON("sidecarset1", "c4k2dbb95d", []string{"dns-f", "log-agent"}, "")+`}`)
			},
		},
		{
			name: "unparsable hash annotation is an error naming it",
			pod: func() *corev1.Pod {
				p := podP1()
				p.Annotations = map[string]string{v1beta1.SidecarSetHashAnnotation: `{"a":{"hash":1}}`}
				return p
			}(),
			sets:    []*v1beta1.SidecarSet{ss1()},
			wantErr: []string{"pod", "metadata.annotations[kruise.io/sidecarset-hash]"},
		},
		{
			name: "W23 only the injected SidecarSets get hash entries",
			pod:  podP1(), sets: []*v1beta1.SidecarSet{ss2, ss3},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "hash", res.Pod.Annotations[v1beta1.SidecarSetHashAnnotation],
					`{"sidecarset2":`+upgradeJSON("sidecarset2", "c4k2dbb95d", []string{"dns-f"}, "")+
						`,"sidecarset3":`+upgradeJSON("sidecarset3", "gm967682cm", []string{"log-agent"}, "")+`}`)
			},
		},
		{
			name: "W24 injected list is the sorted union",
			pod:  podP1(), sets: []*v1beta1.SidecarSet{ss1(), ss3},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "list", res.Pod.Annotations[v1beta1.SidecarSetListAnnotation], "sidecarset1,sidecarset3")
			},
		},
		{
			name: "controllerRevision is status.latestRevision, omitted when empty; existing entries of others kept",
			pod: func() *corev1.Pod {
				p := podP1()
				p.Annotations = map[string]string{v1beta1.SidecarSetHashAnnotation: `{"other":{"updateTimestamp":"2020-01-01T00:00:00Z","hash":"h","sidecarSetName":"other","sidecarList":["x"],"controllerRevision":"other-1"}}`}
				return p
			}(),
			sets: []*v1beta1.SidecarSet{func() *v1beta1.SidecarSet {
				ss := ss1()
				ss.Status.LatestRevision = "sidecarset1-788d67c95d"
				return ss
			}()},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "hash", res.Pod.Annotations[v1beta1.SidecarSetHashAnnotation],
					`{"other":{"updateTimestamp":"2020-01-01T00:00:00Z","hash":"h","sidecarSetName":"other","sidecarList":["x"],"controllerRevision":"other-1"},`+
						`"sidecarset1":`+upgradeJSON("sidecarset1", "c4k2dbb95d", []string{"dns-f", "log-agent"}, "sidecarset1-788d67c95d")+`}`)
			},
		},
		{
			name: "an unchanged hash keeps its updateTimestamp, a changed one moves it",
			pod: func() *corev1.Pod {
				p := podP1()
				p.Annotations = map[string]string{
					v1beta1.SidecarSetHashAnnotation:             `{"sidecarset1":{"updateTimestamp":"2020-01-01T00:00:00Z","hash":"c4k2dbb95d","sidecarSetName":"sidecarset1","sidecarList":["dns-f","log-agent"]}}`,
					v1beta1.SidecarSetHashWithoutImageAnnotation: `{"sidecarset1":{"updateTimestamp":"2020-01-01T00:00:00Z","hash":"stale","sidecarSetName":"sidecarset1","sidecarList":["dns-f","log-agent"]}}`,
				}
				return p
			}(),
			sets: []*v1beta1.SidecarSet{ss1()},
			check: func(t *testing.T, res Result) {
				if !strings.Contains(res.Pod.Annotations[v1beta1.SidecarSetHashAnnotation], `"2020-01-01T00:00:00Z"`) {
					t.Errorf("timestamp of unchanged hash moved: %s", res.Pod.Annotations[v1beta1.SidecarSetHashAnnotation])
				}
				if !strings.Contains(res.Pod.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation], testNowJSON) {
					t.Errorf("timestamp of changed hash kept: %s", res.Pod.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation])
				}
			},
		},
		{
			name: "a SidecarSet without containers is listed but gets no hash entry",
			pod:  podP1(),
			sets: []*v1beta1.SidecarSet{ss1(), newSidecarSet("empty", "e")},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "list", res.Pod.Annotations[v1beta1.SidecarSetListAnnotation], "empty,sidecarset1")
				if strings.Contains(res.Pod.Annotations[v1beta1.SidecarSetHashAnnotation], `"empty"`) {
					t.Errorf("hash entry for a SidecarSet that injected nothing")
				}
				mustEqual(t, "injected", res.Injected, []string{"sidecarset1"})
			},
		},
	})
}

func TestInjectContainerOrder(t *testing.T) {
	// W25–W30: new-sidecar-1 Before, sidecar-1 and sidecar-2 After.
	set := func(which ...string) *v1beta1.SidecarSet {
		ss := newSidecarSet("merge", "h")
		all := map[string]v1beta1.SidecarContainer{
			"new-sidecar-1": sc("new-sidecar-1", "new:1", v1beta1.BeforeAppContainerType),
			"sidecar-1":     sc("sidecar-1", "s1:1", v1beta1.AfterAppContainerType),
			"sidecar-2":     sc("sidecar-2", "s2:1", v1beta1.AfterAppContainerType),
		}
		for _, w := range which {
			ss.Spec.Containers = append(ss.Spec.Containers, all[w])
		}
		return ss
	}
	pod := func(containers ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
		for _, c := range containers {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "app:1"})
		}
		return p
	}
	order := func(want []string, ops ...string) func(*testing.T, Result) {
		return func(t *testing.T, res Result) {
			mustEqual(t, "containers", names(res.Pod.Spec.Containers), want)
			if ops != nil {
				mustEqual(t, "container ops", opsSummary(res.Patch)[:len(ops)], ops)
			}
		}
	}
	runInjectCases(t, []injectCase{
		{name: "W25", pod: pod("app-container"), sets: []*v1beta1.SidecarSet{set("new-sidecar-1", "sidecar-1", "sidecar-2")},
			check: order([]string{"new-sidecar-1", "app-container", "sidecar-1", "sidecar-2"},
				"add /spec/containers/-", "add /spec/containers/-", "add /spec/containers/0")},
		{name: "W26", pod: pod("app-container"), sets: []*v1beta1.SidecarSet{set("new-sidecar-1")},
			check: order([]string{"new-sidecar-1", "app-container"})},
		{name: "W27", pod: pod("app-container"), sets: []*v1beta1.SidecarSet{set("sidecar-1", "sidecar-2")},
			check: order([]string{"app-container", "sidecar-1", "sidecar-2"})},
		{name: "W28 same-name pod containers are replaced in place",
			pod: pod("sidecar-1", "app-container", "sidecar-2"), sets: []*v1beta1.SidecarSet{set("sidecar-1", "sidecar-2")},
			check: func(t *testing.T, res Result) {
				order([]string{"sidecar-1", "app-container", "sidecar-2"},
					"replace /spec/containers/0", "replace /spec/containers/2")(t, res)
				mustEqual(t, "replaced image", res.Pod.Spec.Containers[0].Image, "s1:1")
				mustEqual(t, "replaced image", res.Pod.Spec.Containers[2].Image, "s2:1")
			}},
		{name: "W29", pod: pod("sidecar-1", "app-container", "sidecar-2"), sets: []*v1beta1.SidecarSet{set("new-sidecar-1", "sidecar-1", "sidecar-2")},
			check: order([]string{"new-sidecar-1", "sidecar-1", "app-container", "sidecar-2"},
				"replace /spec/containers/0", "replace /spec/containers/2", "add /spec/containers/0")},
		{name: "W30 pod without containers", pod: pod(), sets: []*v1beta1.SidecarSet{set("new-sidecar-1", "sidecar-1", "sidecar-2")},
			check: order([]string{"new-sidecar-1", "sidecar-1", "sidecar-2"}, "add /spec/containers")},
		{name: "empty podInjectPolicy behaves as After",
			pod: pod("app"),
			sets: []*v1beta1.SidecarSet{func() *v1beta1.SidecarSet {
				ss := newSidecarSet("x", "h")
				ss.Spec.Containers = []v1beta1.SidecarContainer{sc("s", "s:1", "")}
				return ss
			}()},
			check: order([]string{"app", "s"})},
		{name: "containers of several SidecarSets keep SidecarSet order",
			pod: pod("app"),
			sets: []*v1beta1.SidecarSet{
				func() *v1beta1.SidecarSet { ss := set("sidecar-2", "new-sidecar-1"); ss.Name = "a"; return ss }(),
				func() *v1beta1.SidecarSet { ss := set("sidecar-1"); ss.Name = "b"; return ss }(),
			},
			check: order([]string{"new-sidecar-1", "app", "sidecar-2", "sidecar-1"})},
	})
}

func TestInjectInitContainers(t *testing.T) {
	set := func(a, b, c v1beta1.PodInjectPolicyType) *v1beta1.SidecarSet {
		ss := newSidecarSet("inits", "h")
		ss.Spec.InitContainers = []v1beta1.SidecarContainer{
			sc("a-init", "i:1", a), sc("c-init", "i:1", c), sc("b-init", "i:1", b),
		}
		return ss
	}
	pod := func(inits ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
		for _, n := range inits {
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: n})
		}
		return p
	}
	inits := func(want []string, ops ...string) func(*testing.T, Result) {
		return func(t *testing.T, res Result) {
			mustEqual(t, "initContainers", names(res.Pod.Spec.InitContainers), want)
			mustEqual(t, "containers", names(res.Pod.Spec.Containers), []string{"app"})
			if ops != nil {
				mustEqual(t, "init ops", opsSummary(res.Patch)[:len(ops)], ops)
			}
			mustEqual(t, "sidecarList of plain init containers",
				strings.Contains(res.Pod.Annotations[v1beta1.SidecarSetHashAnnotation], `"sidecarList":[]`), true)
		}
	}
	runInjectCases(t, []injectCase{
		{name: "W32 sorted by name", pod: pod(), sets: []*v1beta1.SidecarSet{set("", "", "")},
			check: inits([]string{"a-init", "b-init", "c-init"}, "add /spec/initContainers")},
		{name: "W33 after the pod's own", pod: pod("app1-init", "app2-init"), sets: []*v1beta1.SidecarSet{set("", "", "")},
			check: inits([]string{"app1-init", "app2-init", "a-init", "b-init", "c-init"})},
		{name: "W34 podInjectPolicy applies to init containers",
			pod:  pod("app1-init", "app2-init"),
			sets: []*v1beta1.SidecarSet{set(v1beta1.AfterAppContainerType, v1beta1.BeforeAppContainerType, v1beta1.BeforeAppContainerType)},
			check: inits([]string{"b-init", "c-init", "app1-init", "app2-init", "a-init"},
				"add /spec/initContainers/-", "add /spec/initContainers/0", "add /spec/initContainers/1")},
	})
}

func TestInjectVolumes(t *testing.T) {
	w16 := newSidecarSet("sidecarset2", "h")
	w16.Spec.InitContainers = []v1beta1.SidecarContainer{sc("dns-e", "dns-e:1", "")}
	w16.Spec.InitContainers[0].VolumeMounts = []corev1.VolumeMount{mount("volume-1", "/v1")}
	w16.Spec.Containers = []v1beta1.SidecarContainer{sc("dns-f", "dns-f:1", v1beta1.BeforeAppContainerType)}
	w16.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{mount("volume-1", "/v1")}
	w16.Spec.Volumes = []corev1.Volume{volume("volume-1"), volume("volume-2")}

	w37 := newSidecarSet("missing", "h")
	w37.Spec.InitContainers = []v1beta1.SidecarContainer{sc("i", "i:1", "")}
	w37.Spec.InitContainers[0].VolumeMounts = []corev1.VolumeMount{mount("nope-1", "/n1")}
	w37.Spec.Containers = []v1beta1.SidecarContainer{sc("c", "c:1", "")}
	w37.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{mount("nope-2", "/n2")}
	w37.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{device("nope-3", "/dev/n3")}
	w37.Spec.Volumes = []corev1.Volume{volume("unrelated")}

	w38 := newSidecarSet("order", "h")
	w38.Spec.InitContainers = []v1beta1.SidecarContainer{sc("i", "i:1", "")}
	w38.Spec.InitContainers[0].VolumeMounts = []corev1.VolumeMount{mount("volume-1", "/1"), mount("volume-2", "/2")}
	w38.Spec.InitContainers[0].VolumeDevices = []corev1.VolumeDevice{device("disk0", "/dev/d0")}
	w38.Spec.Containers = []v1beta1.SidecarContainer{sc("c", "c:1", "")}
	w38.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{mount("volume-3", "/3"), mount("volume-4", "/4")}
	w38.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{device("disk1", "/dev/d1")}
	w38.Spec.Volumes = []corev1.Volume{volume("disk1"), volume("volume-4"), volume("volume-3"), volume("disk0"), volume("volume-2"), volume("volume-1")}

	podWins := newSidecarSet("clash", "h")
	podWins.Spec.Containers = []v1beta1.SidecarContainer{sc("c", "c:1", "")}
	podWins.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{mount("volume-a", "/x")}
	podWins.Spec.Volumes = []corev1.Volume{{Name: "volume-a", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/sidecar"}}}}

	noVolumes := func() *corev1.Pod { p := podP1(); p.Spec.Volumes = nil; return p }

	runInjectCases(t, []injectCase{
		{name: "W16 only referenced volumes, once", pod: podP1(), sets: []*v1beta1.SidecarSet{w16},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "volumes", volumeNames(res.Pod.Spec.Volumes), []string{"volume-a", "volume-b", "volume-1"})
				if !contains(opsSummary(res.Patch), "add /spec/volumes/-") {
					t.Errorf("want one append, got %v", opsSummary(res.Patch))
				}
			}},
		{name: "W37 references missing from spec.volumes are skipped without error", pod: podP1(), sets: []*v1beta1.SidecarSet{w37},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "volumes", volumeNames(res.Pod.Spec.Volumes), []string{"volume-a", "volume-b"})
				mustEqual(t, "containers", names(res.Pod.Spec.Containers), []string{"nginx", "c"})
			}},
		{name: "W38 collection order: init mounts, init devices, container mounts, container devices",
			pod: noVolumes(), sets: []*v1beta1.SidecarSet{w38},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "volumes", volumeNames(res.Pod.Spec.Volumes), []string{"volume-1", "volume-2", "disk0", "volume-3", "volume-4", "disk1"})
				if !contains(opsSummary(res.Patch), "add /spec/volumes") {
					t.Errorf("want the absent list added whole, got %v", opsSummary(res.Patch))
				}
			}},
		{name: "a pod volume beats a SidecarSet volume of the same name", pod: podP1(), sets: []*v1beta1.SidecarSet{podWins},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "volumes", res.Pod.Spec.Volumes, podP1().Spec.Volumes)
			}},
	})
}

// podWithStaragent restates the W18–W21 pod: nginx mounts /a/b, /e/f and /staragent.
func podWithStaragent() *corev1.Pod {
	p := podP1()
	p.Spec.InitContainers = nil
	p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, mount("volume-staragent", "/staragent"))
	p.Spec.Volumes = append(p.Spec.Volumes, volume("volume-staragent"))
	return p
}

// shareSet restates the W18 SidecarSet: init dns-e and container dns-f (After), both sharing.
func shareSet() *v1beta1.SidecarSet {
	ss := newSidecarSet("sidecarset3", "gm967682cm")
	e := sc("dns-e", "dns-e:1", "")
	e.ShareVolumePolicy.Type = v1beta1.ShareVolumePolicyEnabled
	e.VolumeMounts = []corev1.VolumeMount{mount("volume-1", "/g/h/i"), mount("volume-2", "/j/k/l"), mount("volume-staragent", "/staragent")}
	f := sc("dns-f", "dns-f:1", v1beta1.AfterAppContainerType)
	f.ShareVolumePolicy.Type = v1beta1.ShareVolumePolicyEnabled
	f.VolumeMounts = []corev1.VolumeMount{mount("volume-1", "/a/b/c"), mount("volume-2", "/d/e/f"), mount("volume-staragent", "/staragent")}
	ss.Spec.InitContainers = []v1beta1.SidecarContainer{e}
	ss.Spec.Containers = []v1beta1.SidecarContainer{f}
	ss.Spec.Volumes = []corev1.Volume{volume("volume-1"), volume("volume-2"), volume("volume-staragent")}
	return ss
}

func TestInjectShareVolumes(t *testing.T) {
	withExpansion := func(subPathExpr string) *corev1.Pod {
		p := podWithStaragent()
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: "volume-expansion", MountPath: "/e/expansion", SubPathExpr: subPathExpr})
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, env("POD_NAME", "bar"), env("OD_NAME", "od_name"))
		p.Spec.Volumes = append(p.Spec.Volumes, volume("volume-expansion"))
		return p
	}
	runInjectCases(t, []injectCase{
		{name: "W18 app mounts are shared, own mounts kept first, same path not duplicated",
			pod: podWithStaragent(), sets: []*v1beta1.SidecarSet{shareSet()},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "init mounts", mountPaths(res.Pod.Spec.InitContainers[0].VolumeMounts),
					[]string{"/g/h/i", "/j/k/l", "/staragent", "/a/b", "/e/f"})
				mustEqual(t, "containers", names(res.Pod.Spec.Containers), []string{"nginx", "dns-f"})
				mustEqual(t, "dns-f mounts", mountPaths(res.Pod.Spec.Containers[1].VolumeMounts),
					[]string{"/a/b/c", "/d/e/f", "/staragent", "/a/b", "/e/f"})
				// the shared /staragent mount is the sidecar's own, not the app's copy
				mustEqual(t, "volumes", volumeNames(res.Pod.Spec.Volumes),
					[]string{"volume-a", "volume-b", "volume-staragent", "volume-1", "volume-2"})
			}},
		{name: "W19 subPathExpr variables are copied from the app container",
			pod: withExpansion("foo/$(POD_NAME)/$(OD_NAME)/conf"), sets: []*v1beta1.SidecarSet{shareSet()},
			check: func(t *testing.T, res Result) {
				for _, c := range []corev1.Container{res.Pod.Spec.InitContainers[0], res.Pod.Spec.Containers[1]} {
					if !contains(mountPaths(c.VolumeMounts), "/e/expansion") {
						t.Errorf("%s lacks /e/expansion", c.Name)
					}
					mustEqual(t, c.Name+" env", c.Env, []corev1.EnvVar{injectedEnv(), env("POD_NAME", "bar"), env("OD_NAME", "od_name")})
				}
			}},
		{name: "W20 subPathExpr without variables copies no env",
			pod: withExpansion("foo"), sets: []*v1beta1.SidecarSet{shareSet()},
			check: func(t *testing.T, res Result) {
				c := res.Pod.Spec.Containers[1]
				if !contains(mountPaths(c.VolumeMounts), "/e/expansion") {
					t.Errorf("lacks /e/expansion")
				}
				mustEqual(t, "env", c.Env, []corev1.EnvVar{injectedEnv()})
			}},
		{name: "W21 empty subPathExpr", pod: withExpansion(""), sets: []*v1beta1.SidecarSet{shareSet()},
			check: func(t *testing.T, res Result) {
				if !contains(mountPaths(res.Pod.Spec.InitContainers[0].VolumeMounts), "/e/expansion") {
					t.Errorf("lacks /e/expansion")
				}
			}},
		{name: "containers already injected (IS_INJECTED=true) are not shared from",
			pod: func() *corev1.Pod {
				p := podWithStaragent()
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "old-sidecar",
					Env: []corev1.EnvVar{injectedEnv()}, VolumeMounts: []corev1.VolumeMount{mount("volume-a", "/sidecar-only")}})
				return p
			}(),
			sets: []*v1beta1.SidecarSet{shareSet()},
			check: func(t *testing.T, res Result) {
				if contains(mountPaths(findContainer(t, res.Pod.Spec.Containers, "dns-f").VolumeMounts), "/sidecar-only") {
					t.Errorf("shared a mount of an injected container")
				}
			}},
	})
}

// podWithDevices restates the W35–W36 pod.
func podWithDevices() *corev1.Pod {
	p := podWithStaragent()
	p.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{device("origin-pvc-1", "/origin-1"), device("origin-pvc-share", "/share")}
	p.Spec.Volumes = append(p.Spec.Volumes, volume("origin-pvc-1"), volume("origin-pvc-share"))
	return p
}

func deviceSet(share bool) *v1beta1.SidecarSet {
	ss := newSidecarSet("devices", "h")
	e := sc("dns-e", "dns-e:1", "")
	e.VolumeDevices = []corev1.VolumeDevice{device("disk0", "/dev/nvme0")}
	f := sc("dns-f", "dns-f:1", v1beta1.AfterAppContainerType)
	f.VolumeDevices = []corev1.VolumeDevice{device("disk0", "/dev/nvme1")}
	ss.Spec.Volumes = []corev1.Volume{volume("disk0")}
	if share {
		e.ShareVolumeDevicePolicy = &v1beta1.ShareVolumePolicy{Type: v1beta1.ShareVolumePolicyEnabled}
		f.ShareVolumeDevicePolicy = &v1beta1.ShareVolumePolicy{Type: v1beta1.ShareVolumePolicyEnabled}
		e.VolumeMounts = []corev1.VolumeMount{mount("volume-3", "/v3"), mount("volume-4", "/v4"), mount("volume-staragent", "/staragent")}
		ss.Spec.Volumes = append(ss.Spec.Volumes, volume("volume-3"), volume("volume-4"), volume("volume-staragent"))
	}
	ss.Spec.InitContainers = []v1beta1.SidecarContainer{e}
	ss.Spec.Containers = []v1beta1.SidecarContainer{f}
	return ss
}

func TestInjectVolumeDevices(t *testing.T) {
	runInjectCases(t, []injectCase{
		{name: "W35 sharing off: own devices only", pod: podWithDevices(), sets: []*v1beta1.SidecarSet{deviceSet(false)},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "init devices", res.Pod.Spec.InitContainers[0].VolumeDevices, []corev1.VolumeDevice{device("disk0", "/dev/nvme0")})
				mustEqual(t, "container devices", findContainer(t, res.Pod.Spec.Containers, "dns-f").VolumeDevices,
					[]corev1.VolumeDevice{device("disk0", "/dev/nvme1")})
				mustEqual(t, "volumes", volumeNames(res.Pod.Spec.Volumes),
					[]string{"volume-a", "volume-b", "volume-staragent", "origin-pvc-1", "origin-pvc-share", "disk0"})
			}},
		{name: "W36 shareVolumeDevicePolicy enabled", pod: podWithDevices(), sets: []*v1beta1.SidecarSet{deviceSet(true)},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "init devices", res.Pod.Spec.InitContainers[0].VolumeDevices, []corev1.VolumeDevice{
					device("disk0", "/dev/nvme0"), device("origin-pvc-1", "/origin-1"), device("origin-pvc-share", "/share")})
				mustEqual(t, "container devices", findContainer(t, res.Pod.Spec.Containers, "dns-f").VolumeDevices, []corev1.VolumeDevice{
					device("disk0", "/dev/nvme1"), device("origin-pvc-1", "/origin-1"), device("origin-pvc-share", "/share")})
				mustEqual(t, "volumes", volumeNames(res.Pod.Spec.Volumes),
					[]string{"volume-a", "volume-b", "volume-staragent", "origin-pvc-1", "origin-pvc-share", "volume-3", "volume-4", "disk0"})
			}},
		{name: "a shared device whose path is a mount path of the sidecar is dropped, and vice versa",
			pod: func() *corev1.Pod {
				p := podWithDevices()
				p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, mount("volume-a", "/dev/nvme1"))
				return p
			}(),
			sets: []*v1beta1.SidecarSet{func() *v1beta1.SidecarSet {
				ss := deviceSet(true)
				ss.Spec.Containers[0].ShareVolumePolicy.Type = v1beta1.ShareVolumePolicyEnabled
				ss.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{mount("volume-3", "/share")}
				return ss
			}()},
			check: func(t *testing.T, res Result) {
				f := findContainer(t, res.Pod.Spec.Containers, "dns-f")
				if contains(mountPaths(f.VolumeMounts), "/dev/nvme1") {
					t.Errorf("shared mount collides with own device: %v", mountPaths(f.VolumeMounts))
				}
				mustEqual(t, "devices", f.VolumeDevices, []corev1.VolumeDevice{device("disk0", "/dev/nvme1"), device("origin-pvc-1", "/origin-1")})
			}},
	})
}

func TestInjectTransferEnv(t *testing.T) {
	w22 := newSidecarSet("sidecarset2", "h")
	transfer := []v1beta1.TransferEnvVar{{SourceContainerName: "nginx", EnvName: "hello2"}}
	e := sc("dns-e", "dns-e:1", "")
	e.TransferEnv = transfer
	f := sc("dns-f", "dns-f:1", v1beta1.BeforeAppContainerType)
	f.TransferEnv = transfer
	w22.Spec.InitContainers = []v1beta1.SidecarContainer{e}
	w22.Spec.Containers = []v1beta1.SidecarContainer{f}

	s13 := func(t v1beta1.TransferEnvVar) *v1beta1.SidecarSet {
		ss := newSidecarSet("s13", "h")
		c := sc("sidecar", "s:1", "")
		c.TransferEnv = []v1beta1.TransferEnvVar{t}
		ss.Spec.Containers = []v1beta1.SidecarContainer{c}
		return ss
	}
	s13Pod := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "main"}, Annotations: map[string]string{"app": "main"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main",
				Env: []corev1.EnvVar{env("test-env", "test-value"), env("b", "2"), env("a", "1")}}}},
		}
	}
	sidecarEnv := func(want ...corev1.EnvVar) func(*testing.T, Result) {
		return func(t *testing.T, res Result) {
			mustEqual(t, "env", findContainer(t, res.Pod.Spec.Containers, "sidecar").Env, want)
		}
	}
	fromField := func(path string) *v1beta1.SourceContainerNameSource {
		return &v1beta1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}
	}

	runInjectCases(t, []injectCase{
		{name: "W22 transferEnv into an init container and a container", pod: podP1(), sets: []*v1beta1.SidecarSet{w22},
			check: func(t *testing.T, res Result) {
				want := []corev1.EnvVar{injectedEnv(), env("hello2", "world2")}
				mustEqual(t, "init", names(res.Pod.Spec.InitContainers), []string{"init-0", "dns-e"})
				mustEqual(t, "init env", res.Pod.Spec.InitContainers[1].Env, want)
				mustEqual(t, "containers", names(res.Pod.Spec.Containers), []string{"dns-f", "nginx"})
				mustEqual(t, "container env", res.Pod.Spec.Containers[0].Env, want)
			}},
		{name: "S13 by sourceContainerName", pod: s13Pod(),
			sets:  []*v1beta1.SidecarSet{s13(v1beta1.TransferEnvVar{SourceContainerName: "main", EnvName: "test-env"})},
			check: sidecarEnv(injectedEnv(), env("test-env", "test-value"))},
		{name: "S13 by sourceContainerNameFrom label", pod: s13Pod(),
			sets:  []*v1beta1.SidecarSet{s13(v1beta1.TransferEnvVar{SourceContainerNameFrom: fromField("metadata.labels['app']"), EnvName: "test-env"})},
			check: sidecarEnv(injectedEnv(), env("test-env", "test-value"))},
		{name: "S13 by sourceContainerNameFrom annotation, overriding sourceContainerName", pod: s13Pod(),
			sets: []*v1beta1.SidecarSet{s13(v1beta1.TransferEnvVar{SourceContainerName: "nope",
				SourceContainerNameFrom: fromField("metadata.annotations['app']"), EnvName: "test-env"})},
			check: sidecarEnv(injectedEnv(), env("test-env", "test-value"))},
		{name: "envName ∪ envNames, deduplicated and sorted", pod: s13Pod(),
			sets: []*v1beta1.SidecarSet{s13(v1beta1.TransferEnvVar{SourceContainerName: "main", EnvName: "test-env",
				EnvNames: []string{"b", "test-env", "a", "missing"}})},
			check: sidecarEnv(injectedEnv(), env("a", "1"), env("b", "2"), env("test-env", "test-value"))},
		{name: "unsupported fieldPath skips the entry", pod: s13Pod(),
			sets:  []*v1beta1.SidecarSet{s13(v1beta1.TransferEnvVar{SourceContainerName: "main", SourceContainerNameFrom: fromField("metadata.name"), EnvName: "a"})},
			check: sidecarEnv(injectedEnv())},
		{name: "sidecar's own env wins over transferred env of the same name", pod: s13Pod(),
			sets: []*v1beta1.SidecarSet{func() *v1beta1.SidecarSet {
				ss := s13(v1beta1.TransferEnvVar{SourceContainerName: "main", EnvNames: []string{"a", "IS_INJECTED"}})
				ss.Spec.Containers[0].Env = []corev1.EnvVar{env("a", "own")}
				return ss
			}()},
			check: sidecarEnv(env("a", "own"), injectedEnv())},
	})
}

func TestInjectNativeAndHotUpgrade(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	w31 := func() []*v1beta1.SidecarSet {
		a := newSidecarSet("sidecarset-1", "sidecarset-1-hash")
		a.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation] = "sidecarset-1-without-image-hash"
		i1 := sc("init-1", "init:1", "")
		i1.RestartPolicy = &always
		i1.VolumeMounts = []corev1.VolumeMount{mount("volume-1", "/v1")}
		i1.TransferEnv = []v1beta1.TransferEnvVar{{SourceContainerName: "nginx", EnvName: "hello2"}}
		a.Spec.InitContainers = []v1beta1.SidecarContainer{i1}
		a.Spec.Volumes = []corev1.Volume{volume("volume-1")}

		b := newSidecarSet("sidecarset-2", "sidecarset-2-hash")
		b.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation] = "sidecarset-2-without-image-hash"
		h := sc("hot-init", "hot:1", "")
		h.RestartPolicy = &always
		h.UpgradeStrategy = v1beta1.SidecarContainerUpgradeStrategy{UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "empty:v1"}
		h.VolumeMounts = []corev1.VolumeMount{mount("volume-1", "/v1")}
		h.TransferEnv = []v1beta1.TransferEnvVar{{SourceContainerName: "nginx", EnvName: "hello2"}}
		b.Spec.InitContainers = []v1beta1.SidecarContainer{h}
		b.Spec.Volumes = []corev1.Volume{volume("volume-1")}
		return []*v1beta1.SidecarSet{a, b}
	}
	w39 := func() *v1beta1.SidecarSet {
		ss := ss1()
		ss.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation] = "without-c4k2dbb95d"
		ss.Spec.Containers[0].UpgradeStrategy = v1beta1.SidecarContainerUpgradeStrategy{
			UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "busy:hotupgrade-empty"}
		return ss
	}
	versionEnv := func(envName, prefix, container string) corev1.EnvVar {
		return corev1.EnvVar{Name: envName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			FieldPath: "metadata.annotations['" + prefix + container + "']"}}}
	}

	runInjectCases(t, []injectCase{
		{name: "W31 native sidecars: sidecarList, hot twins, annotations exactly", pod: podP1(), sets: w31(),
			check: func(t *testing.T, res Result) {
				mustEqual(t, "initContainers", names(res.Pod.Spec.InitContainers), []string{"init-0", "hot-init-1", "hot-init-2", "init-1"})
				mustEqual(t, "volumes", volumeNames(res.Pod.Spec.Volumes), []string{"volume-a", "volume-b", "volume-1"})
				spec := func(name, hash, c string) string {
					return `"` + name + `":` + upgradeJSON(name, hash, []string{c}, "")
				}
				mustEqual(t, "annotations", res.Pod.Annotations, map[string]string{
					v1beta1.SidecarSetHashAnnotation: "{" + spec("sidecarset-1", "sidecarset-1-hash", "init-1") + "," +
						spec("sidecarset-2", "sidecarset-2-hash", "hot-init") + "}",
					v1beta1.SidecarSetHashWithoutImageAnnotation: "{" + spec("sidecarset-1", "sidecarset-1-without-image-hash", "init-1") + "," +
						spec("sidecarset-2", "sidecarset-2-without-image-hash", "hot-init") + "}",
					v1beta1.SidecarSetListAnnotation:                            "sidecarset-1,sidecarset-2",
					v1beta1.SidecarSetWorkingHotUpgradeContainer:                `{"hot-init":"hot-init-1"}`,
					v1beta1.SidecarSetVersionAnnotationPrefix + "hot-init-1":    "1",
					v1beta1.SidecarSetVersionAltAnnotationPrefix + "hot-init-1": "0",
					v1beta1.SidecarSetVersionAnnotationPrefix + "hot-init-2":    "0",
					v1beta1.SidecarSetVersionAltAnnotationPrefix + "hot-init-2": "1",
				})
				hot2 := res.Pod.Spec.InitContainers[2]
				mustEqual(t, "idle twin image", hot2.Image, "empty:v1")
				mustEqual(t, "idle twin env", hot2.Env, []corev1.EnvVar{injectedEnv(), env("hello2", "world2"),
					versionEnv("SIDECARSET_VERSION", v1beta1.SidecarSetVersionAnnotationPrefix, "hot-init-2"),
					versionEnv("SIDECARSET_VERSION_ALT", v1beta1.SidecarSetVersionAltAnnotationPrefix, "hot-init-2")})
			}},
		{name: "W39 hot upgrade container", pod: podP1(), sets: []*v1beta1.SidecarSet{w39()},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "containers", names(res.Pod.Spec.Containers), []string{"dns-f-1", "dns-f-2", "nginx", "log-agent"})
				mustEqual(t, "images", []string{res.Pod.Spec.Containers[0].Image, res.Pod.Spec.Containers[1].Image},
					[]string{"dns-f-image:1.0", "busy:hotupgrade-empty"})
				ann := res.Pod.Annotations
				mustEqual(t, "hash", ann[v1beta1.SidecarSetHashAnnotation],
					`{"sidecarset1":`+upgradeJSON("sidecarset1", "c4k2dbb95d", []string{"dns-f", "log-agent"}, "")+`}`)
				mustEqual(t, "without image", ann[v1beta1.SidecarSetHashWithoutImageAnnotation],
					`{"sidecarset1":`+upgradeJSON("sidecarset1", "without-c4k2dbb95d", []string{"dns-f", "log-agent"}, "")+`}`)
				mustEqual(t, "list", ann[v1beta1.SidecarSetListAnnotation], "sidecarset1")
				mustEqual(t, "working", ann[v1beta1.SidecarSetWorkingHotUpgradeContainer], `{"dns-f":"dns-f-1"}`)
				mustEqual(t, "versions", []string{
					ann[v1beta1.SidecarSetVersionAnnotationPrefix+"dns-f-1"], ann[v1beta1.SidecarSetVersionAltAnnotationPrefix+"dns-f-1"],
					ann[v1beta1.SidecarSetVersionAnnotationPrefix+"dns-f-2"], ann[v1beta1.SidecarSetVersionAltAnnotationPrefix+"dns-f-2"],
				}, []string{"1", "0", "0", "1"})
				mustEqual(t, "working twin env", res.Pod.Spec.Containers[0].Env, []corev1.EnvVar{injectedEnv(),
					versionEnv("SIDECARSET_VERSION", v1beta1.SidecarSetVersionAnnotationPrefix, "dns-f-1"),
					versionEnv("SIDECARSET_VERSION_ALT", v1beta1.SidecarSetVersionAltAnnotationPrefix, "dns-f-1")})
			}},
		{name: "working hot-upgrade map is merged with the pod's",
			pod: func() *corev1.Pod {
				p := podP1()
				p.Annotations = map[string]string{v1beta1.SidecarSetWorkingHotUpgradeContainer: `{"envoy":"envoy-2"}`}
				return p
			}(),
			sets: []*v1beta1.SidecarSet{w39()},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "working", res.Pod.Annotations[v1beta1.SidecarSetWorkingHotUpgradeContainer], `{"dns-f":"dns-f-1","envoy":"envoy-2"}`)
			}},
		{name: "HotUpgrade on a non-native init container injects it once",
			pod: podP1(),
			sets: []*v1beta1.SidecarSet{func() *v1beta1.SidecarSet {
				ss := newSidecarSet("plain", "h")
				i := sc("i", "i:1", "")
				i.UpgradeStrategy.UpgradeType = v1beta1.SidecarContainerHotUpgrade
				ss.Spec.InitContainers = []v1beta1.SidecarContainer{i}
				return ss
			}()},
			check: func(t *testing.T, res Result) {
				mustEqual(t, "initContainers", names(res.Pod.Spec.InitContainers), []string{"init-0", "i"})
				if _, ok := res.Pod.Annotations[v1beta1.SidecarSetWorkingHotUpgradeContainer]; ok {
					t.Errorf("working annotation without a hot container")
				}
			}},
	})
}

func TestInjectInputErrors(t *testing.T) {
	ok := fixedInjector()
	cases := []struct {
		name  string
		inj   *Injector
		input Input
		want  string
	}{
		{"nil injector", nil, Input{Pod: podP1()}, "Injector.Now"},
		{"no clock", &Injector{}, Input{Pod: podP1()}, "Injector.Now"},
		{"nil pod", ok, Input{}, "Input.Pod"},
		{"nil SidecarSet", ok, Input{Pod: podP1(), SidecarSets: []*v1beta1.SidecarSet{ss1(), nil}}, "Input.SidecarSets[1]"},
		{"revision without revisions", ok, Input{Pod: podP1(), SidecarSets: []*v1beta1.SidecarSet{func() *v1beta1.SidecarSet {
			ss := ss1()
			name := "r"
			ss.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{RevisionName: &name}
			return ss
		}()}}, `SidecarSet "sidecarset1" spec.injectionStrategy.revision`},
		{"Partial without rand", &Injector{Now: time.Now}, Input{Pod: podP1(), History: staticRevisions(),
			SidecarSets: []*v1beta1.SidecarSet{func() *v1beta1.SidecarSet {
				ss := ss1()
				v := "v"
				ss.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{CustomVersion: &v, Policy: v1beta1.PartialSidecarSetInjectRevisionPolicy}
				return ss
			}()}}, "Injector.Rand"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.inj.Inject(tc.input)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want error containing %q, got %v", tc.want, err)
			}
		})
	}
}
