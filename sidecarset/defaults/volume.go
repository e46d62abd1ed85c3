package defaults

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
)

// Volume applies Kubernetes' SetDefaults_Volume and the volume-source defaults OpenKruise's
// SetDefaultPodVolumes applies. v may be nil.
func Volume(v *corev1.Volume) {
	if v == nil {
		return
	}
	if allPtrFieldsNil(&v.VolumeSource) {
		// Kubernetes' historical default: a volume without a source is an emptyDir.
		v.VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	}
	src := &v.VolumeSource
	if src.Image != nil && src.Image.PullPolicy == "" {
		src.Image.PullPolicy = pullPolicyFor(src.Image.Reference)
	}
	if src.HostPath != nil && src.HostPath.Type == nil {
		unset := corev1.HostPathUnset
		src.HostPath.Type = &unset
	}
	if src.Secret != nil {
		defaultMode(&src.Secret.DefaultMode, corev1.SecretVolumeSourceDefaultMode)
	}
	if src.ConfigMap != nil {
		defaultMode(&src.ConfigMap.DefaultMode, corev1.ConfigMapVolumeSourceDefaultMode)
	}
	if src.DownwardAPI != nil {
		defaultMode(&src.DownwardAPI.DefaultMode, corev1.DownwardAPIVolumeSourceDefaultMode)
		downwardAPIItems(src.DownwardAPI.Items)
	}
	if src.Projected != nil {
		defaultMode(&src.Projected.DefaultMode, corev1.ProjectedVolumeSourceDefaultMode)
		for i := range src.Projected.Sources {
			p := &src.Projected.Sources[i]
			if p.DownwardAPI != nil {
				downwardAPIItems(p.DownwardAPI.Items)
			}
			if p.ServiceAccountToken != nil && p.ServiceAccountToken.ExpirationSeconds == nil {
				hour := int64(3600)
				p.ServiceAccountToken.ExpirationSeconds = &hour
			}
		}
	}
}

func defaultMode(mode **int32, def int32) {
	if *mode == nil {
		m := def
		*mode = &m
	}
}

func downwardAPIItems(items []corev1.DownwardAPIVolumeFile) {
	for i := range items {
		objectFieldSelector(items[i].FieldRef)
	}
}

// allPtrFieldsNil is k8s.io/utils/ptr.AllPtrFieldsNil for VolumeSource: by reflection, so that a
// source type added to VolumeSource in a later k8s.io/api still counts as a source.
func allPtrFieldsNil(src *corev1.VolumeSource) bool {
	v := reflect.ValueOf(src).Elem()
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			return false
		}
	}
	return true
}
