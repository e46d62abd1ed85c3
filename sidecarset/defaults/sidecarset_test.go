package defaults

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// M1 (compat §4.3): the expected values are copied from docs/openkruise-compat.md, including both hashes.
func TestM1(t *testing.T) {
	ss := &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "sidecarset-test"},
		Spec: v1beta1.SidecarSetSpec{
			Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "dns-f", Image: "dns:1.0"}}},
			PatchPodMetadata: []v1beta1.SidecarSetPatchPodMetadata{
				{Annotations: map[string]string{"key1": "value1"}},
			},
			InjectionStrategy: v1beta1.SidecarSetInjectionStrategy{
				Revision: &v1beta1.SidecarSetInjectRevision{CustomVersion: ptr("1")},
			},
		},
	}
	require.NoError(t, SidecarSetAndHash(ss))

	us := ss.Spec.UpdateStrategy
	assert.Equal(t, v1beta1.RollingUpdateSidecarSetStrategyType, us.Type)
	assert.Equal(t, intstr.FromInt32(0), *us.Partition)
	assert.Equal(t, intstr.FromInt32(1), *us.MaxUnavailable)

	c := ss.Spec.Containers[0]
	assert.Equal(t, v1beta1.BeforeAppContainerType, c.PodInjectPolicy)
	assert.Equal(t, v1beta1.ShareVolumePolicyDisabled, c.ShareVolumePolicy.Type)
	assert.Equal(t, v1beta1.SidecarContainerColdUpgrade, c.UpgradeStrategy.UpgradeType)
	assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy)
	assert.Equal(t, "/dev/termination-log", c.TerminationMessagePath)
	assert.Equal(t, corev1.TerminationMessageReadFile, c.TerminationMessagePolicy)

	assert.Equal(t, "6wbd76bd7984x24fb4f44fv9222cw9v9bcf85x766744wddd4zwx927zzz2zb684",
		ss.Annotations["kruise.io/sidecarset-hash"])
	assert.Equal(t, "82684vwf9d4cb4wz4vffx4ddfbb47ww4z4wwxdbwb8w2zbb7zvf4524cdd49bv94",
		ss.Annotations["kruise.io/sidecarset-hash-without-image"])

	assert.Equal(t, v1beta1.SidecarSetRetainPatchPolicy, ss.Spec.PatchPodMetadata[0].PatchPolicy)
	assert.Equal(t, v1beta1.AlwaysSidecarSetInjectRevisionPolicy, ss.Spec.InjectionStrategy.Revision.Policy)
}

func TestSidecarSetAndHashKeepsOtherAnnotationsAndRewritesStaleHash(t *testing.T) {
	ss := &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			"team":                      "infra",
			"kruise.io/sidecarset-hash": "stale",
		}},
		Spec: v1beta1.SidecarSetSpec{Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "dns-f", Image: "dns:1.0"}}}},
	}
	require.NoError(t, SidecarSetAndHash(ss))
	assert.Equal(t, "infra", ss.Annotations["team"])
	assert.Equal(t, "6wbd76bd7984x24fb4f44fv9222cw9v9bcf85x766744wddd4zwx927zzz2zb684", ss.Annotations["kruise.io/sidecarset-hash"])
	assert.Error(t, SidecarSetAndHash(nil))
}

func TestUpdateStrategyDefaults(t *testing.T) {
	cases := []struct {
		name string
		in   v1beta1.SidecarSetUpdateStrategy
		want v1beta1.SidecarSetUpdateStrategy
	}{
		{
			name: "empty",
			want: v1beta1.SidecarSetUpdateStrategy{Type: "RollingUpdate", Partition: ptr(intstr.FromInt32(0)), MaxUnavailable: ptr(intstr.FromInt32(1))},
		},
		{
			// OpenKruise defaults partition and maxUnavailable whatever the type.
			name: "NotUpdate",
			in:   v1beta1.SidecarSetUpdateStrategy{Type: "NotUpdate"},
			want: v1beta1.SidecarSetUpdateStrategy{Type: "NotUpdate", Partition: ptr(intstr.FromInt32(0)), MaxUnavailable: ptr(intstr.FromInt32(1))},
		},
		{
			name: "set values kept",
			in:   v1beta1.SidecarSetUpdateStrategy{Partition: ptr(intstr.FromString("10%")), MaxUnavailable: ptr(intstr.FromInt32(0))},
			want: v1beta1.SidecarSetUpdateStrategy{Type: "RollingUpdate", Partition: ptr(intstr.FromString("10%")), MaxUnavailable: ptr(intstr.FromInt32(0))},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ss := &v1beta1.SidecarSet{Spec: v1beta1.SidecarSetSpec{UpdateStrategy: tc.in}}
			SidecarSet(ss)
			assert.Equal(t, tc.want, ss.Spec.UpdateStrategy)
		})
	}
}

func TestSidecarContainerDefaults(t *testing.T) {
	hot := v1beta1.SidecarContainerUpgradeStrategy{UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "empty:1"}
	ss := &v1beta1.SidecarSet{Spec: v1beta1.SidecarSetSpec{
		InitContainers: []v1beta1.SidecarContainer{
			{Container: corev1.Container{Name: "init", Image: "busybox:1"}},
			{Container: corev1.Container{Name: "init-before", Image: "busybox:1"}, PodInjectPolicy: v1beta1.BeforeAppContainerType},
		},
		Containers: []v1beta1.SidecarContainer{
			{Container: corev1.Container{Name: "plain", Image: "a:1"}},
			{
				Container:         corev1.Container{Name: "set", Image: "a:1"},
				PodInjectPolicy:   v1beta1.AfterAppContainerType,
				UpgradeStrategy:   hot,
				ShareVolumePolicy: v1beta1.ShareVolumePolicy{Type: v1beta1.ShareVolumePolicyEnabled},
			},
		},
	}}
	SidecarSet(ss)

	init := ss.Spec.InitContainers
	assert.Equal(t, v1beta1.AfterAppContainerType, init[0].PodInjectPolicy, "initContainers default to After")
	assert.Equal(t, v1beta1.BeforeAppContainerType, init[1].PodInjectPolicy)
	assert.Equal(t, v1beta1.SidecarContainerColdUpgrade, init[0].UpgradeStrategy.UpgradeType)
	assert.Equal(t, v1beta1.ShareVolumePolicyDisabled, init[0].ShareVolumePolicy.Type)
	assert.Equal(t, corev1.PullIfNotPresent, init[0].ImagePullPolicy, "Kubernetes container defaults apply to initContainers")

	cs := ss.Spec.Containers
	assert.Equal(t, v1beta1.BeforeAppContainerType, cs[0].PodInjectPolicy, "containers default to Before")
	assert.Equal(t, v1beta1.SidecarContainerColdUpgrade, cs[0].UpgradeStrategy.UpgradeType)
	assert.Equal(t, v1beta1.ShareVolumePolicyDisabled, cs[0].ShareVolumePolicy.Type)
	assert.Nil(t, cs[0].ShareVolumeDevicePolicy, "not defaulted: it would change the hash of existing SidecarSets")
	assert.Equal(t, "/dev/termination-log", cs[0].TerminationMessagePath)

	assert.Equal(t, v1beta1.AfterAppContainerType, cs[1].PodInjectPolicy)
	assert.Equal(t, hot, cs[1].UpgradeStrategy)
	assert.Equal(t, v1beta1.ShareVolumePolicyEnabled, cs[1].ShareVolumePolicy.Type)
}

func TestTransferEnvFieldRef(t *testing.T) {
	ss := &v1beta1.SidecarSet{Spec: v1beta1.SidecarSetSpec{Containers: []v1beta1.SidecarContainer{{
		Container: corev1.Container{Name: "c", Image: "a:1"},
		TransferEnv: []v1beta1.TransferEnvVar{
			{SourceContainerName: "main", EnvName: "E"},
			{SourceContainerNameFrom: &v1beta1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}, EnvName: "E"},
			{SourceContainerNameFrom: &v1beta1.SourceContainerNameSource{}, EnvName: "E"},
		},
	}}}}
	assert.NotPanics(t, func() { SidecarSet(ss) })
	te := ss.Spec.Containers[0].TransferEnv
	assert.Nil(t, te[0].SourceContainerNameFrom)
	assert.Equal(t, "v1", te[1].SourceContainerNameFrom.FieldRef.APIVersion)
	assert.Nil(t, te[2].SourceContainerNameFrom.FieldRef, "left for validation to report")
}

func TestResourcesPolicyRegexDefault(t *testing.T) {
	ss := &v1beta1.SidecarSet{Spec: v1beta1.SidecarSetSpec{Containers: []v1beta1.SidecarContainer{
		{Container: corev1.Container{Name: "a"}, ResourcesPolicy: &v1beta1.ResourcesPolicy{TargetContainersMode: "sum"}},
		{Container: corev1.Container{Name: "b"}, ResourcesPolicy: &v1beta1.ResourcesPolicy{TargetContainersMode: "max", TargetContainersNameRegex: "^app$"}},
		{Container: corev1.Container{Name: "c"}},
	}}}
	SidecarSet(ss)
	assert.Equal(t, ".*", ss.Spec.Containers[0].ResourcesPolicy.TargetContainersNameRegex)
	assert.Equal(t, "^app$", ss.Spec.Containers[1].ResourcesPolicy.TargetContainersNameRegex)
	assert.Nil(t, ss.Spec.Containers[2].ResourcesPolicy)
}

func TestSpecLevelDefaults(t *testing.T) {
	t.Run("revisionHistoryLimit", func(t *testing.T) {
		ss := &v1beta1.SidecarSet{}
		SidecarSet(ss)
		assert.Equal(t, int32(10), *ss.Spec.RevisionHistoryLimit)

		ss = &v1beta1.SidecarSet{Spec: v1beta1.SidecarSetSpec{RevisionHistoryLimit: ptr(int32(0))}}
		SidecarSet(ss)
		assert.Equal(t, int32(0), *ss.Spec.RevisionHistoryLimit)
	})
	t.Run("patchPolicy", func(t *testing.T) {
		ss := &v1beta1.SidecarSet{Spec: v1beta1.SidecarSetSpec{PatchPodMetadata: []v1beta1.SidecarSetPatchPodMetadata{
			{Annotations: map[string]string{"a": "1"}},
			{Annotations: map[string]string{"b": "1"}, PatchPolicy: v1beta1.SidecarSetOverwritePatchPolicy},
		}}}
		SidecarSet(ss)
		assert.Equal(t, v1beta1.SidecarSetRetainPatchPolicy, ss.Spec.PatchPodMetadata[0].PatchPolicy)
		assert.Equal(t, v1beta1.SidecarSetOverwritePatchPolicy, ss.Spec.PatchPodMetadata[1].PatchPolicy)
	})
	t.Run("injection revision policy", func(t *testing.T) {
		ss := &v1beta1.SidecarSet{}
		SidecarSet(ss)
		assert.Nil(t, ss.Spec.InjectionStrategy.Revision, "no revision, nothing to default")

		ss = &v1beta1.SidecarSet{Spec: v1beta1.SidecarSetSpec{InjectionStrategy: v1beta1.SidecarSetInjectionStrategy{
			Revision: &v1beta1.SidecarSetInjectRevision{RevisionName: ptr("r"), Policy: v1beta1.PartialSidecarSetInjectRevisionPolicy}}}}
		SidecarSet(ss)
		assert.Equal(t, v1beta1.PartialSidecarSetInjectRevisionPolicy, ss.Spec.InjectionStrategy.Revision.Policy)
	})
	t.Run("volumes", func(t *testing.T) {
		ss := &v1beta1.SidecarSet{Spec: v1beta1.SidecarSetSpec{Volumes: []corev1.Volume{{Name: "test-volume"}}}}
		SidecarSet(ss)
		assert.NotNil(t, ss.Spec.Volumes[0].EmptyDir)
	})
	t.Run("nil", func(t *testing.T) {
		assert.NotPanics(t, func() { SidecarSet(nil) })
	})
}

// full is a SidecarSet that exercises every default at once.
func full() *v1beta1.SidecarSet {
	return &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "full"},
		Spec: v1beta1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			InitContainers: []v1beta1.SidecarContainer{{Container: corev1.Container{
				Name: "init", Image: "busybox", RestartPolicy: ptr(corev1.ContainerRestartPolicyAlways)}}},
			Containers: []v1beta1.SidecarContainer{{
				Container: corev1.Container{
					Name: "c", Image: "reg:5000/c",
					Ports:          []corev1.ContainerPort{{ContainerPort: 80}},
					Env:            []corev1.EnvVar{{Name: "N", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
					LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}},
					Lifecycle:      &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
				},
				TransferEnv: []v1beta1.TransferEnvVar{{SourceContainerNameFrom: &v1beta1.SourceContainerNameSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}, EnvName: "E"}},
				ResourcesPolicy: &v1beta1.ResourcesPolicy{TargetContainersMode: "sum"},
			}},
			Volumes: []corev1.Volume{
				{Name: "none"},
				{Name: "hp", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}},
				{Name: "tok", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "t"}}}}}},
			},
			PatchPodMetadata:  []v1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"k": "v"}}},
			InjectionStrategy: v1beta1.SidecarSetInjectionStrategy{Revision: &v1beta1.SidecarSetInjectRevision{CustomVersion: ptr("1")}},
		},
	}
}

func TestIdempotent(t *testing.T) {
	once := full()
	require.NoError(t, SidecarSetAndHash(once))
	twice := once.DeepCopy()
	require.NoError(t, SidecarSetAndHash(twice))
	assert.Equal(t, once, twice)
}

// FuzzIdempotent checks, on arbitrary decodable input, that defaulting never panics and that
// defaulting twice equals defaulting once. `go test` runs the seeds only.
func FuzzIdempotent(f *testing.F) {
	seed, err := json.Marshal(full())
	require.NoError(f, err)
	f.Add(seed)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"spec":{"containers":[{"name":"a","transferEnv":[{"sourceContainerNameFrom":{}}]}],"volumes":[{"name":"v"}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ss v1beta1.SidecarSet
		if json.Unmarshal(data, &ss) != nil {
			return
		}
		if SidecarSetAndHash(&ss) != nil {
			return
		}
		again := ss.DeepCopy()
		require.NoError(t, SidecarSetAndHash(again))
		a, _ := json.Marshal(&ss)
		b, _ := json.Marshal(again)
		assert.JSONEq(t, string(a), string(b))
	})
}
