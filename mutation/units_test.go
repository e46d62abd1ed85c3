package mutation

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

func TestContainerNameFromFieldRef(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Labels:      map[string]string{"test-label": "test-pod-label"},
		Annotations: map[string]string{"test-anno": "test-pod-anno"},
	}}
	cases := []struct {
		path, want string
		err        bool
	}{
		{path: "metadata.labels['test-label']", want: "test-pod-label"}, // S12
		{path: "metadata.labels['missing']", want: ""},                  // S12: label missing
		{path: "metadata.annotations['test-anno']", want: "test-pod-anno"},
		{path: "metadata.annotations['Test-Anno']", want: ""}, // annotation keys are validated lower-cased, read as given
		{path: "metadata.name", err: true},                    // S11
		{path: "metadata.labels", err: true},
		{path: "metadata.annotations", err: true},
		{path: "spec.nodeName['x']", err: true},
		{path: "metadata.labels['bad key']", err: true},
		{path: "['x']", err: true},
	}
	for _, tc := range cases {
		got, err := containerNameFromFieldRef(tc.path, pod.Annotations, pod.Labels)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: got (%q, %v), want (%q, error=%v)", tc.path, got, err, tc.want, tc.err)
		}
	}
}

func TestPointerToken(t *testing.T) {
	for in, want := range map[string]string{
		"kruise.io/sidecarset-hash": "kruise.io~1sidecarset-hash",
		"a~b":                       "a~0b",
		"~1":                        "~01",
		"/~":                        "~1~0",
		"":                          "",
	} {
		if got := pointerToken(in); got != want {
			t.Errorf("pointerToken(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMergePatchJSON(t *testing.T) {
	cases := []struct {
		doc, patch, want string
		err              error
	}{
		{`{"log-agent":1}`, `{"envoy":2}`, `{"envoy":2,"log-agent":1}`, nil},
		{`{"a":1,"b":{"c":1}}`, `{"b":{"d":2},"a":null}`, `{"b":{"c":1,"d":2}}`, nil},
		{`{"z":1}`, `{"y":1,"x":1,"w":1}`, `{"w":1,"x":1,"y":1,"z":1}`, nil}, // deterministic order
		{` { "a" : 1.50 } `, `{}`, `{"a":1.50}`, nil},                        // numbers verbatim
		{`{"a":"<&>"}`, `{}`, `{"a":"\u003c\u0026\u003e"}`, nil},             // encoding/json escaping
		{`[1,2]`, `{"a":1}`, `{"a":1}`, nil},
		{`{"a":1}`, `[1,null]`, `[1,null]`, nil},
		{`{"a":1}`, `5`, "", errMergePatchNotDocument},
		{`{"a":1}`, `null`, "", errMergePatchNotDocument},
		{`{"a":1}`, `"s"`, "", errMergePatchNotDocument},
	}
	for _, tc := range cases {
		got, err := mergePatchJSON(tc.doc, tc.patch)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("merge(%s, %s): err %v, want %v", tc.doc, tc.patch, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("merge(%s, %s) = %s, %v; want %s", tc.doc, tc.patch, got, err, tc.want)
		}
	}
	for _, bad := range [][2]string{{`not json`, `{}`}, {`{}`, `{"a":`}, {`null`, `{}`}} {
		if _, err := mergePatchJSON(bad[0], bad[1]); err == nil {
			t.Errorf("merge(%s, %s): want error", bad[0], bad[1])
		}
	}
}

func TestParseUpgradeSpecs(t *testing.T) {
	key := v1beta1.SidecarSetHashAnnotation
	cases := []struct {
		value string
		want  map[string]upgradeSpec
		err   bool
	}{
		{"", nil, false},
		{`{"s":{"hash":"aaa"}}`, map[string]upgradeSpec{"s": {Hash: "aaa"}}, false},             // S7
		{`{"s":"aaa"}`, map[string]upgradeSpec{"s": {Hash: "aaa", SidecarSetName: "s"}}, false}, // S8
		{`null`, nil, false},
		{`{}`, nil, false},
		{`garbage`, nil, true},                    // S9
		{`{"s":{"hash":"a"},"t":"b"}`, nil, true}, // mixed forms
	}
	for _, tc := range cases {
		got, err := parseUpgradeSpecs(map[string]string{key: tc.value}, key, make([]upgradeSpec, 2))
		if (err != nil) != tc.err {
			t.Errorf("%q: err %v", tc.value, err)
			continue
		}
		if !tc.err {
			mustEqual(t, tc.value, got.had, tc.want)
			mustEqual(t, tc.value+": room for the entries to record", cap(got.recorded), 2)
		}
	}
}

func TestInjectedList(t *testing.T) {
	mustEqual(t, "empty", injectedList("", []string{"b", "a"}), "a,b")
	mustEqual(t, "empty, in order", injectedList("", []string{"a", "b"}), "a,b")
	mustEqual(t, "empty, repeated", injectedList("", []string{"a", "a", "b"}), "a,b")
	mustEqual(t, "union", injectedList("c,a", []string{"b", "a"}), "a,b,c")
	// A malformed old value is carried as OpenKruise carries it (split without cleaning).
	mustEqual(t, "malformed", injectedList("a,,c", []string{"b"}), ",a,b,c")
}

func TestWorkingHotUpgrade(t *testing.T) {
	key := v1beta1.SidecarSetWorkingHotUpgradeContainer
	mustEqual(t, "absent", workingHotUpgrade(nil), map[string]string{})
	mustEqual(t, "map", workingHotUpgrade(map[string]string{key: `{"a":"a-1"}`}), map[string]string{"a": "a-1"})
	mustEqual(t, "null", workingHotUpgrade(map[string]string{key: `null`}), map[string]string{})
	mustEqual(t, "syntax error", workingHotUpgrade(map[string]string{key: `{`}), map[string]string{})
}

func TestMergeContainersGrowth(t *testing.T) {
	pod := []corev1.Container{{Name: "a"}, {Name: "b", Image: "old"}, {Name: "a", Image: "dup"}}
	sidecars := []placed{
		{container: &corev1.Container{Name: "f1"}, policy: v1beta1.BeforeAppContainerType},
		{container: &corev1.Container{Name: "a", Image: "x"}, policy: v1beta1.BeforeAppContainerType},
		{container: &corev1.Container{Name: "b", Image: "old"}},
		{container: &corev1.Container{Name: "z"}, policy: "Weird"},
		{container: &corev1.Container{Name: "f2"}, policy: v1beta1.BeforeAppContainerType},
	}
	g := mergeContainers(pod, sidecars)
	merged := g.apply(pod)
	mustEqual(t, "names", names(merged), []string{"f1", "f2", "a", "b", "a", "z"})
	mustEqual(t, "last same-name index is replaced", merged[4].Image, "x")
	mustEqual(t, "first duplicate untouched", merged[2].Image, "")
	mustEqual(t, "identical replacement is not a change", len(g.replaced), 1)
	mustEqual(t, "replaced index", g.replaced[0].index, 2)
	mustEqual(t, "pod slice not modified", pod[2].Image, "dup")
	mustEqual(t, "ops", opsSummary(g.appendOps(nil, pathContainers)), []string{
		"replace /spec/containers/2", "add /spec/containers/-", "add /spec/containers/0", "add /spec/containers/1"})

	// An empty pod list is written whole: front, then back.
	g = mergeContainers(nil, sidecars)
	mustEqual(t, "whole list", string(mustJSON(t, g.appendOps(nil, pathContainers))),
		`[{"op":"add","path":"/spec/containers","value":[{"name":"f1","resources":{}},{"name":"a","image":"x","resources":{}},{"name":"f2","resources":{}},{"name":"b","image":"old","resources":{}},{"name":"z","resources":{}}]}]`)
	mustEqual(t, "applied to nothing", names(g.apply(nil)), []string{"f1", "a", "f2", "b", "z"})

	g = mergeContainers(pod, nil)
	same := g.apply(pod)
	if len(g.appendOps(nil, pathContainers)) != 0 || len(same) != len(pod) {
		t.Errorf("no sidecars must be no change")
	}
}

// paths is a set whether it holds its paths in its list or, past pathsListed, in a map.
func TestPaths(t *testing.T) {
	for _, n := range []int{0, 1, pathsListed - 1, pathsListed, pathsListed + 1, 4 * pathsListed} {
		var s paths
		want := map[string]bool{}
		// Each path is claimed twice, the second time when others have been claimed since, so that
		// repeats are looked up in the list and in the map.
		for round := range 2 {
			for i := range n {
				p := fmt.Sprintf("/p/%d", (i*7)%n)
				if got := s.claim(p); got != !want[p] {
					t.Fatalf("n=%d round %d: claim(%s) = %v, want %v", n, round, p, got, !want[p])
				}
				want[p] = true
			}
		}
		if got := max(s.n, len(s.set)); got != len(want) {
			t.Fatalf("n=%d: holds %d paths, want %d", n, got, len(want))
		}
	}
}
