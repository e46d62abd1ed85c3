package defaults

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestVolume(t *testing.T) {
	cases := []struct {
		name string
		in   corev1.Volume
		want string // JSON of the defaulted volume
	}{
		{
			// Kubernetes defaults a volume without a source to emptyDir (decision D5, compat §4.4 V9).
			name: "no source",
			in:   corev1.Volume{Name: "v"},
			want: `{"name":"v","emptyDir":{}}`,
		},
		{
			name: "emptyDir untouched",
			in:   corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			want: `{"name":"v","emptyDir":{"medium":"Memory"}}`,
		},
		{
			name: "hostPath type",
			in:   corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/home/work"}}},
			want: `{"name":"v","hostPath":{"path":"/home/work","type":""}}`,
		},
		{
			name: "hostPath type kept",
			in: corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: "/d", Type: ptr(corev1.HostPathDirectory)}}},
			want: `{"name":"v","hostPath":{"path":"/d","type":"Directory"}}`,
		},
		{
			name: "secret defaultMode",
			in:   corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
			want: `{"name":"v","secret":{"secretName":"s","defaultMode":420}}`,
		},
		{
			name: "configMap defaultMode kept",
			in: corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, DefaultMode: ptr(int32(0o400))}}},
			want: `{"name":"v","configMap":{"name":"c","defaultMode":256}}`,
		},
		{
			name: "configMap defaultMode",
			in: corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}},
			want: `{"name":"v","configMap":{"name":"c","defaultMode":420}}`,
		},
		{
			name: "downwardAPI defaultMode and fieldRef",
			in: corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
				Items: []corev1.DownwardAPIVolumeFile{
					{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
					{Path: "cpu", ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}},
				}}}},
			want: `{"name":"v","downwardAPI":{"items":[{"path":"labels","fieldRef":{"apiVersion":"v1","fieldPath":"metadata.labels"}},` +
				`{"path":"cpu","resourceFieldRef":{"resource":"limits.cpu","divisor":"0"}}],"defaultMode":420}}`,
		},
		{
			name: "projected",
			in: corev1.Volume{Name: "istio-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "istio-ca", Path: "istio-token"}},
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "t2", ExpirationSeconds: ptr(int64(43200))}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
						{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}},
				}}}},
			want: `{"name":"istio-token","projected":{"sources":[` +
				`{"serviceAccountToken":{"audience":"istio-ca","expirationSeconds":3600,"path":"istio-token"}},` +
				`{"serviceAccountToken":{"expirationSeconds":43200,"path":"t2"}},` +
				`{"downwardAPI":{"items":[{"path":"name","fieldRef":{"apiVersion":"v1","fieldPath":"metadata.name"}}]}},` +
				`{"configMap":{"name":"c"}}],"defaultMode":420}}`,
		},
		{
			name: "image volume pullPolicy",
			in:   corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "tools:1.0"}}},
			want: `{"name":"v","image":{"reference":"tools:1.0","pullPolicy":"IfNotPresent"}}`,
		},
		{
			name: "image volume latest",
			in:   corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "tools"}}},
			want: `{"name":"v","image":{"reference":"tools","pullPolicy":"Always"}}`,
		},
		{
			// OpenKruise's SetDefaultPodVolumes does not default ISCSI (iscsiInterface) and volumes are
			// part of ControllerRevision data, so neither do we.
			name: "iscsi untouched",
			in: corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{
				TargetPortal: "10.0.0.1:3260", IQN: "iqn", Lun: 0}}},
			want: `{"name":"v","iscsi":{"targetPortal":"10.0.0.1:3260","iqn":"iqn","lun":0}}`,
		},
		{
			name: "pvc untouched",
			in: corev1.Volume{Name: "disk0", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: "c"}}},
			want: `{"name":"disk0","persistentVolumeClaim":{"claimName":"c"}}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.in.DeepCopy()
			Volume(v)
			b, err := json.Marshal(v)
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(b))

			again := v.DeepCopy()
			Volume(again)
			assert.Equal(t, v, again, "idempotent")
		})
	}
}

func TestVolumeNil(t *testing.T) {
	assert.NotPanics(t, func() { Volume(nil) })
}

func ptr[T any](v T) *T { return &v }
