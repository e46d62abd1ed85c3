package bundles

import (
	"fmt"
	"maps"
	mathrand "math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// TestBuilderMatchesAFreshBuild is a property test of the Builder's reuse: over a random sequence of
// States, each differing from the last by added, replaced and removed objects of every kind, what a
// long-lived Builder builds is what a new one builds from the same State: same data, rules and
// revision. A reused part that should have been rebuilt (or a stale index entry) shows up here.
func TestBuilderMatchesAFreshBuild(t *testing.T) {
	rnd := mathrand.New(mathrand.NewPCG(3, 5))
	sets := map[string]*v1beta1.SidecarSet{}
	namespaces := map[string]*corev1.Namespace{}
	revisions := map[string]*appsv1.ControllerRevision{}
	newSet := func(name string) *v1beta1.SidecarSet {
		return sidecarSet(name, labels("app", fmt.Sprint(rnd.IntN(3))), func(ss *v1beta1.SidecarSet) {
			ss.Spec.InjectionStrategy.Paused = rnd.IntN(5) == 0
			ss.Spec.Volumes = []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMedium(fmt.Sprint(rnd.IntN(2)))}}}}
			if rnd.IntN(4) == 0 {
				ss.Annotations = map[string]string{v1beta1.SidecarSetCanaryAnnotation: "true", v1beta1.SidecarSetBaseAnnotation: "ss-0"}
			}
		})
	}
	var b Builder
	changed := 0
	for round := range 40 {
		for range 1 + rnd.IntN(4) {
			i := rnd.IntN(12)
			name := fmt.Sprintf("ss-%d", i)
			switch rnd.IntN(3) {
			case 0:
				delete(sets, name)
			default:
				sets[name] = newSet(name)
			}
			nsName := fmt.Sprintf("ns-%d", rnd.IntN(4))
			if rnd.IntN(2) == 0 {
				delete(namespaces, nsName)
			} else {
				namespaces[nsName] = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName, Labels: map[string]string{"env": fmt.Sprint(rnd.IntN(2))}}}
			}
			crName := fmt.Sprintf("cr-%d", rnd.IntN(4))
			revisions[crName] = &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: crName, Labels: map[string]string{v1beta1.SidecarSetNameLabel: name}}, Revision: int64(rnd.IntN(3))}
		}
		st := State{SidecarSets: slices.Collect(maps.Values(sets)), Namespaces: slices.Collect(maps.Values(namespaces)), ControllerRevisions: slices.Collect(maps.Values(revisions))}
		before := b.sets
		got, err := b.Build(st)
		require.NoError(t, err)
		want, err := new(Builder).Build(st)
		require.NoError(t, err)
		require.Equal(t, want.Revision, got.Revision, "round %d", round)
		require.Equal(t, want.Rules, got.Rules, "round %d", round)
		require.Zero(t, want.Data.Compare(got.Data), "round %d:\n got %v\nwant %v", round, got.Data, want.Data)
		for name, p := range b.sets {
			if before[name] != nil && before[name] != p {
				changed++
			}
		}
	}
	assert.Positive(t, changed, "the sequence must replace SidecarSets the Builder had seen")
}

// A Build that fails (here a duplicate name) leaves the Builder as it was: the next Build of the
// previous State reuses everything.
func TestBuilderFailedBuildChangesNothing(t *testing.T) {
	a := sidecarSet("a", labels("x", "y"))
	var b Builder
	first, err := b.Build(State{SidecarSets: []*v1beta1.SidecarSet{a}})
	require.NoError(t, err)
	_, err = b.Build(State{SidecarSets: []*v1beta1.SidecarSet{sidecarSet("b", labels("x", "y")), sidecarSet("b", labels("x", "z"))}})
	require.ErrorContains(t, err, "SidecarSet/b: metadata.name: duplicate SidecarSet name")
	part := b.sets["a"]
	again, err := b.Build(State{SidecarSets: []*v1beta1.SidecarSet{a}})
	require.NoError(t, err)
	assert.Equal(t, first.Revision, again.Revision)
	assert.Same(t, part, b.sets["a"], "the unchanged SidecarSet is not compiled again")
}

// The bundle of a Build holds the index of every SidecarSet and the data as plain JSON values.
func TestBuildBundle(t *testing.T) {
	st := State{SidecarSets: []*v1beta1.SidecarSet{sidecarSet("a", labels("app", "web")), sidecarSet("b", nil)}}
	build, err := new(Builder).Build(st)
	require.NoError(t, err)
	assert.Equal(t, "", build.Rules["b"], "a SidecarSet without a selector has no rule")
	b, err := build.Bundle()
	require.NoError(t, err)
	assert.Equal(t, build.Revision, b.Manifest.Revision)
	var index string
	for _, m := range b.Modules {
		if m.Path == "/"+IndexModulePath {
			index = string(m.Raw)
		}
	}
	assert.Equal(t, IndexModule(IndexPackage, build.Rules), index)
	assert.Contains(t, index, `matches contains "a" if {`)
	sets := b.Data[Root].(map[string]any)["state"].(map[string]any)["sidecarsets"].(map[string]any)
	// The data holds, per SidecarSet, what the policies read of it beside others and nothing more
	// (docs/design.md, "Bundle contract"); the input of a review adds its name, labels and volume
	// names.
	assert.ElementsMatch(t, []string{"created", "canary", "base", "selector", "namespaceSelector", "injectionPaused",
		"containers", "initContainers", "volumeHashes", "patchPodMetadata"}, slices.Collect(maps.Keys(sets["a"].(map[string]any))))
	in, err := Normalize(st.SidecarSets[0])
	require.NoError(t, err)
	assert.Equal(t, "a", in["name"])
	assert.Subset(t, slices.Collect(maps.Keys(in)), []string{"name", "labels", "volumeNames"})
}
