package history

import (
	"encoding/json"
	"hash/fnv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/vectors"
	"github.com/sidecarops/sidecarops/sidecarset/hashes"
)

// ---- fixtures ----

// vectorSidecarSet is the defaulted SidecarSet of the compat §1.10 verified vector. Fields that are not
// recorded in a revision are set too, to show that they do not reach data.raw.
func vectorSidecarSet() *v1beta1.SidecarSet {
	zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
	return &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "sidecarset-test", Annotations: map[string]string{
			v1beta1.SidecarSetHashAnnotation:             "6wbd76bd7984x24fb4f44fv9222cw9v9bcf85x766744wddd4zwx927zzz2zb684",
			v1beta1.SidecarSetHashWithoutImageAnnotation: "82684vwf9d4cb4wz4vffx4ddfbb47ww4z4wwxdbwb8w2zbb7zvf4524cdd49bv94",
		}},
		Spec: v1beta1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}},
			Containers: []v1beta1.SidecarContainer{vectors.DNSF()},
			UpdateStrategy: v1beta1.SidecarSetUpdateStrategy{
				Type: v1beta1.RollingUpdateSidecarSetStrategyType, Partition: &zero, MaxUnavailable: &one,
			},
			RevisionHistoryLimit: int32p(10),
		},
	}
}

const vectorRaw = `{"spec":{"$patch":"replace","containers":[{"image":"dns:1.0","imagePullPolicy":"IfNotPresent","name":"dns-f","podInjectPolicy":"BeforeAppContainer","resources":{},"shareVolumePolicy":{"type":"disabled"},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","upgradeStrategy":{"upgradeType":"ColdUpgrade"}}],"imagePullSecrets":null,"initContainers":null,"patchPodMetadata":null,"volumes":null}}`

func sc(name, image string) v1beta1.SidecarContainer {
	return v1beta1.SidecarContainer{Container: corev1.Container{Name: name, Image: image}}
}

// revisionOf records ss as the controller would: data.raw, name, labels, annotations.
func revisionOf(t *testing.T, ss *v1beta1.SidecarSet, number int64, customVersion string) *appsv1.ControllerRevision {
	t.Helper()
	raw, err := Raw(ss)
	require.NoError(t, err)
	labels := map[string]string{v1beta1.SidecarSetNameLabel: ss.Name, v1beta1.ControllerRevisionHashLabel: Hash(raw, 0)}
	if customVersion != "" {
		labels[v1beta1.SidecarSetCustomVersionLabel] = customVersion
	}
	annotations := map[string]string{}
	for k, v := range ss.Annotations {
		annotations[k] = v
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: Name(ss, raw, 0), Namespace: "kruise-system", Labels: labels, Annotations: annotations},
		Data:       runtime.RawExtension{Raw: raw},
		Revision:   number,
	}
}

// ---- Raw / Name ----

func TestRawVector(t *testing.T) {
	raw, err := Raw(vectorSidecarSet())
	require.NoError(t, err)
	assert.Equal(t, vectorRaw, string(raw))
}

func TestNameVector(t *testing.T) {
	raw := []byte(vectorRaw)
	h := fnv.New32()
	h.Write(append(append([]byte(nil), raw...), '0'))
	require.Equal(t, uint32(3448237518), h.Sum32(), "FNV-1 of data.raw + \"0\"")
	assert.Equal(t, "788d67c95d", Hash(raw, 0))
	assert.Equal(t, "sidecarset-test-788d67c95d", Name(vectorSidecarSet(), raw, 0))
	assert.NotEqual(t, Name(vectorSidecarSet(), raw, 0), Name(vectorSidecarSet(), raw, 1), "collisionCount changes the name")
}

func TestNamePrefixTruncated(t *testing.T) {
	ss := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("a", 250)}}
	name := Name(ss, []byte("{}"), 0)
	assert.Equal(t, strings.Repeat("a", 223)+"-"+Hash([]byte("{}"), 0), name)
	assert.Equal(t, "-"+Hash(nil, 0), Name(nil, nil, 0), "nil SidecarSet does not panic")
}

func TestRawRecordsOnlyTheFiveFields(t *testing.T) {
	ss := vectorSidecarSet()
	ss.Spec.InitContainers = []v1beta1.SidecarContainer{sc("init-1", "busybox")}
	ss.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "s0"}}
	ss.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, DefaultMode: int32p(420)},
	}}}
	ss.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"k": "<v&>"}, PatchPolicy: v1beta1.SidecarSetRetainPatchPolicy}}
	ss.Spec.InjectionStrategy.Paused = true
	raw, err := Raw(ss)
	require.NoError(t, err)

	var got map[string]map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &got))
	require.Len(t, got, 1)
	var keys []string
	for k := range got["spec"] {
		keys = append(keys, k)
	}
	assert.ElementsMatch(t, []string{"$patch", "containers", "imagePullSecrets", "initContainers", "patchPodMetadata", "volumes"}, keys)
	assert.JSONEq(t, `[{"name":"s0"}]`, string(got["spec"]["imagePullSecrets"]))
	assert.JSONEq(t, `[{"name":"cfg","configMap":{"name":"c","defaultMode":420}}]`, string(got["spec"]["volumes"]))
	assert.Contains(t, string(raw), `"defaultMode":420`)
	assert.Contains(t, string(raw), `\u003cv\u0026\u003e`, "HTML-escaped like encoding/json, as OpenKruise")
	assert.Contains(t, string(raw), `"patchPodMetadata":[{"annotations":{"k":`)

	_, err = Raw(nil)
	assert.Error(t, err)
}

// ---- Source ----

func TestStaticSource(t *testing.T) {
	a := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{v1beta1.SidecarSetNameLabel: "s1"}}}
	b := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{v1beta1.SidecarSetNameLabel: "s1"}}}
	c := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
	src := NewStaticSource(a, nil, b, c)
	got, ok := src.ByName("c")
	assert.True(t, ok)
	assert.Same(t, c, got)
	_, ok = src.ByName("zz")
	assert.False(t, ok)
	assert.ElementsMatch(t, []*appsv1.ControllerRevision{a, b}, src.ForSidecarSet("s1"))
	assert.Empty(t, src.ForSidecarSet("s2"))
	assert.Empty(t, NewStaticSource().ForSidecarSet("s1"))
}

// ---- Find ----

func TestFind(t *testing.T) {
	owned := func(name, set, version string, number int64, created time.Time) *appsv1.ControllerRevision {
		l := map[string]string{v1beta1.SidecarSetNameLabel: set}
		if version != "-" {
			l[v1beta1.SidecarSetCustomVersionLabel] = version
		}
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, CreationTimestamp: metav1.NewTime(created)}, Revision: number}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	src := NewStaticSource(
		owned("s1-v1-old", "s1", "v1", 1, t0),
		owned("s1-v1-new", "s1", "v1", 3, t0),
		owned("s1-v2", "s1", "v2", 2, t0),
		owned("s2-v1-newest", "s2", "v1", 9, t0), // same custom version, other SidecarSet
		owned("s1-nolabel", "s1", "-", 7, t0),
		owned("s1-tie-a", "s1", "tie", 5, t0),
		owned("s1-tie-b", "s1", "tie", 5, t0.Add(time.Hour)), // same .revision, created later
		owned("s1-tie-c", "s1", "tie", 5, t0),
	)
	ss := func(revisionName, customVersion *string) *v1beta1.SidecarSet {
		s := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s1"}}
		if revisionName != nil || customVersion != nil {
			s.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{RevisionName: revisionName, CustomVersion: customVersion}
		}
		return s
	}
	tests := []struct {
		name    string
		ss      *v1beta1.SidecarSet
		src     Source
		want    string // "" = nil
		wantErr []string
	}{
		{name: "nothing configured", ss: ss(nil, nil), src: src},
		{name: "revision set without names", ss: &v1beta1.SidecarSet{Spec: v1beta1.SidecarSetSpec{InjectionStrategy: v1beta1.SidecarSetInjectionStrategy{
			Revision: &v1beta1.SidecarSetInjectRevision{Policy: v1beta1.AlwaysSidecarSetInjectRevisionPolicy}}}}, src: src},
		{name: "nothing configured, nil source", ss: ss(nil, nil), src: nil},
		{name: "customVersion picks the highest .revision", ss: ss(nil, strp("v1")), src: src, want: "s1-v1-new"},
		{name: "customVersion ties broken by creation time", ss: ss(nil, strp("tie")), src: src, want: "s1-tie-b"},
		{name: "revisionName wins over customVersion", ss: ss(strp("s1-v2"), strp("v1")), src: src, want: "s1-v2"},
		{name: "revisionName has no ownership check", ss: ss(strp("s2-v1-newest"), nil), src: src, want: "s2-v1-newest"},
		{name: "revisionName not found", ss: ss(strp("s1-missing"), strp("v1")), src: src,
			wantErr: []string{`sidecarset "s1"`, `revisionName`, `"s1-missing"`, "not found"}},
		{name: "customVersion not found", ss: ss(nil, strp("v9")), src: src,
			wantErr: []string{`sidecarset "s1"`, "customVersion", "apps.kruise.io/sidecarset-custom-version=v9", "kruise.io/sidecarset-name=s1"}},
		{name: "empty customVersion does not match unlabelled revisions", ss: ss(nil, strp("")), src: src,
			wantErr: []string{"customVersion"}},
		{name: "configured with nil source", ss: ss(nil, strp("v1")), src: nil, wantErr: []string{`sidecarset "s1"`, "no ControllerRevisions"}},
		{name: "nil SidecarSet", ss: nil, src: src, wantErr: []string{"nil SidecarSet"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Find(tc.ss, tc.src)
			if tc.wantErr != nil {
				require.Error(t, err)
				for _, s := range tc.wantErr {
					assert.Contains(t, err.Error(), s)
				}
				return
			}
			require.NoError(t, err)
			if tc.want == "" {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			assert.Equal(t, tc.want, got.Name)
		})
	}
}

// ---- Restore ----

// ss1 is compat §4's SS1: initContainers [init-2, init-1], containers [dns-f, log-agent].
func ss1() *v1beta1.SidecarSet {
	return &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "sidecarset1", Labels: map[string]string{"team": "a"},
			Annotations: map[string]string{v1beta1.SidecarSetHashAnnotation: "c4k2dbb95d", "other": "kept"}},
		Spec: v1beta1.SidecarSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "suxing-test"}},
			InitContainers: []v1beta1.SidecarContainer{sc("init-2", "busybox:2"), sc("init-1", "busybox:1")},
			Containers:     []v1beta1.SidecarContainer{sc("dns-f", "dns:2"), sc("log-agent", "log:2")},
			Volumes:        []corev1.Volume{{Name: "v-new"}},
		},
		Status: v1beta1.SidecarSetStatus{LatestRevision: "sidecarset1-latest", MatchedPods: 3},
	}
}

func TestRestore(t *testing.T) {
	old := ss1()
	old.Spec.InitContainers = old.Spec.InitContainers[:1]
	old.Spec.Containers = []v1beta1.SidecarContainer{sc("dns-f", "dns:1")}
	old.Spec.Volumes = nil
	old.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "s-old"}}
	cr := revisionOf(t, old, 1, "sidecarset1-12345")
	cr.Annotations = map[string]string{
		v1beta1.SidecarSetHashAnnotation:             "old-hash",
		v1beta1.SidecarSetHashWithoutImageAnnotation: "old-hash-without-image",
	}

	cur := ss1()
	before := cur.DeepCopy()
	got, err := Restore(cur, cr)
	require.NoError(t, err)
	assert.Equal(t, before, cur, "input not modified")

	assert.Equal(t, []v1beta1.SidecarContainer{sc("init-2", "busybox:2")}, got.Spec.InitContainers)
	assert.Equal(t, []v1beta1.SidecarContainer{sc("dns-f", "dns:1")}, got.Spec.Containers)
	assert.Nil(t, got.Spec.Volumes, "null in data.raw clears the field")
	assert.Equal(t, []corev1.LocalObjectReference{{Name: "s-old"}}, got.Spec.ImagePullSecrets)
	// "$patch": "replace" replaces the whole spec: unrecorded fields are gone, as in OpenKruise.
	assert.Nil(t, got.Spec.Selector)

	assert.Equal(t, "sidecarset1", got.Name)
	assert.Equal(t, map[string]string{"team": "a"}, got.Labels)
	assert.Equal(t, "kept", got.Annotations["other"])
	assert.Equal(t, "old-hash", got.Annotations[v1beta1.SidecarSetHashAnnotation])
	assert.Equal(t, "old-hash-without-image", got.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation])
	assert.Equal(t, cr.Name, got.Status.LatestRevision)
	assert.Equal(t, int32(3), got.Status.MatchedPods)
}

func TestRestoreRecomputesMissingHashes(t *testing.T) {
	old := ss1()
	old.Spec.Containers = []v1beta1.SidecarContainer{sc("dns-f", "dns:1")}
	cr := revisionOf(t, old, 1, "")
	cr.Annotations = nil
	cur := ss1()
	cur.Annotations = nil
	got, err := Restore(cur, cr)
	require.NoError(t, err)
	wantHash, err := hashes.SidecarSetHash(got)
	require.NoError(t, err)
	wantWithout, err := hashes.SidecarSetHashWithoutImage(got)
	require.NoError(t, err)
	assert.Equal(t, wantHash, got.Annotations[v1beta1.SidecarSetHashAnnotation])
	assert.Equal(t, wantWithout, got.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation])
	assert.NotEqual(t, wantHash, wantWithout)
}

func TestRestoreVectorRoundTrip(t *testing.T) {
	ss := vectorSidecarSet()
	cr := revisionOf(t, ss, 1, "")
	got, err := Restore(ss, cr)
	require.NoError(t, err)
	assert.Equal(t, ss.Spec.Containers, got.Spec.Containers)
	assert.Equal(t, "sidecarset-test-788d67c95d", got.Status.LatestRevision)
	assert.Equal(t, ss.Annotations[v1beta1.SidecarSetHashAnnotation], got.Annotations[v1beta1.SidecarSetHashAnnotation])
	h, err := hashes.SidecarSetHash(got)
	require.NoError(t, err)
	assert.Equal(t, ss.Annotations[v1beta1.SidecarSetHashAnnotation], h, "restored containers hash like the originals")
	raw, err := Raw(got)
	require.NoError(t, err)
	assert.Equal(t, vectorRaw, string(raw), "restoring then recording is the identity on data.raw")
}

func TestRestoreErrors(t *testing.T) {
	cr := func(raw string) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "r1"}, Data: runtime.RawExtension{Raw: []byte(raw)}}
	}
	for name, tc := range map[string]struct {
		ss  *v1beta1.SidecarSet
		cr  *appsv1.ControllerRevision
		err string
	}{
		"nil SidecarSet": {nil, cr("{}"), "nil SidecarSet"},
		"nil revision":   {ss1(), nil, `sidecarset "sidecarset1": restoring a nil ControllerRevision`},
		"empty raw":      {ss1(), cr(""), `sidecarset "sidecarset1": restoring ControllerRevision "r1": data.raw is empty`},
		"not JSON":       {ss1(), cr("not json"), `restoring ControllerRevision "r1"`},
		"not an object":  {ss1(), cr("[1,2]"), `restoring ControllerRevision "r1"`},
		"wrong type":     {ss1(), cr(`{"spec":{"$patch":"replace","containers":"x"}}`), `restoring ControllerRevision "r1"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Restore(tc.ss, tc.cr)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

func TestRestoreFromDataObject(t *testing.T) {
	old := ss1()
	old.Spec.Containers = []v1beta1.SidecarContainer{sc("dns-f", "dns:1")}
	raw, err := Raw(old)
	require.NoError(t, err)
	var obj map[string]interface{}
	require.NoError(t, json.Unmarshal(raw, &obj))
	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "r1"},
		Data: runtime.RawExtension{Object: &unstructured.Unstructured{Object: obj}}}
	got, err := Restore(ss1(), cr)
	require.NoError(t, err)
	assert.Equal(t, old.Spec.Containers, got.Spec.Containers)
}

func int32p(i int32) *int32 { return &i }
func strp(s string) *string { return &s }

// Revisions written before OpenKruise added "$patch": "replace" merge into the current spec: the
// recorded fields are replaced (lists without a patch strategy are atomic), the rest is kept.
func TestRestoreLegacyRawWithoutReplaceDirective(t *testing.T) {
	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "legacy"},
		Data: runtime.RawExtension{Raw: []byte(`{"spec":{"containers":[{"name":"dns-f","image":"dns:0"}],"imagePullSecrets":null,"initContainers":null,"volumes":null}}`)}}
	got, err := Restore(ss1(), cr)
	require.NoError(t, err)
	assert.Equal(t, []v1beta1.SidecarContainer{sc("dns-f", "dns:0")}, got.Spec.Containers)
	assert.Nil(t, got.Spec.InitContainers)
	assert.Nil(t, got.Spec.Volumes)
	assert.Equal(t, ss1().Spec.Selector, got.Spec.Selector)
}
