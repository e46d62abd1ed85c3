package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sidecarops/sidecarops/internal/testing/fleet"
)

// podNamespace is where the pod is created; the fleet's matching SidecarSets are cluster-scoped.
const podNamespace = "shop"

// admissionPod is test/bench's pod (a Deployment's pod, named by generateName, selected by the
// fleet's matching SidecarSets) as the API server hands it to a mutating webhook: decoded with the
// defaults applied (image pull policy, termination message, DNS and restart policy, scheduler,
// priority, …), the ReplicaSet as owner, and the built-in admission plugins that run before
// webhooks already through (ServiceAccount's projected token volume and mount,
// DefaultTolerationSeconds). A webhook's request is this size, not the template's, and decoding it
// is part of every admission.
func admissionPod() *corev1.Pod {
	yes := true
	grace := int64(30)
	tolerate := int64(300)
	tokenTTL := int64(3607)
	mode := int32(0o644)
	priority := int32(0)
	preempt := corev1.PreemptLowerPriority
	token := "kube-api-access-7xq2p"
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "web-7d9c8-", Namespace: podNamespace,
			Labels:      map[string]string{"app": fleet.MatchingApp, "pod-template-hash": "7d9c8", "version": "v3"},
			Annotations: map[string]string{"prometheus.io/scrape": "true"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9c8",
				UID: "5f3c1a9e-8d2b-4c67-9e41-0a7b3c2d1e6f", Controller: &yes, BlockOwnerDeletion: &yes,
			}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "web", Image: "nginx:1.27",
				Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env:   []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    *resource.NewMilliQuantity(100, resource.DecimalSI),
					corev1.ResourceMemory: *resource.NewQuantity(128<<20, resource.BinarySI),
				}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "logs", MountPath: "/var/log/nginx"},
					{Name: token, ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"},
				},
				TerminationMessagePath:   corev1.TerminationMessagePathDefault,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy:          corev1.PullIfNotPresent,
			}},
			Volumes: []corev1.Volume{
				{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: token, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					DefaultMode: &mode,
					Sources: []corev1.VolumeProjection{
						{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &tokenTTL, Path: "token"}},
						{ConfigMap: &corev1.ConfigMapProjection{
							LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
							Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
						}},
						{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
							Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
						}}}},
					},
				}}},
			},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			DNSPolicy:                     corev1.DNSClusterFirst,
			ServiceAccountName:            "default",
			DeprecatedServiceAccount:      "default",
			SecurityContext:               &corev1.PodSecurityContext{},
			SchedulerName:                 corev1.DefaultSchedulerName,
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &tolerate},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &tolerate},
			},
			Priority:           &priority,
			EnableServiceLinks: &yes,
			PreemptionPolicy:   &preempt,
		},
	}
}

// uidTemplate is the request uid in the marshalled body; each request overwrites it in its own
// copy of the body (see stampUID), so no request has to be marshalled again.
const uidTemplate = "00000000-0000-4000-8000-000000000000"

// distinctLabel, with --distinct-pods, is a label of the pod holding the request's uid: no two pods
// are then alike to the webhook's per-pod cache (internal/injector.Cache), as when every pod comes
// from a template of its own, so every admission is decided and injected.
const distinctLabel = "loadgen.sidecarops.io/pod"

// reviewBody is the AdmissionReview the API server posts for the creation of pod by the ReplicaSet
// controller, marshalled once, and the offsets of uidTemplate's 36 characters in it: the request
// uid's first, then a distinctLabel's value if pod has one.
func reviewBody(pod *corev1.Pod) (body []byte, uidAt []int, err error) {
	raw, err := json.Marshal(pod)
	if err != nil {
		return nil, nil, err
	}
	gvk := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	gvr := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	dryRun := false
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:  uidTemplate,
			Kind: gvk, Resource: gvr, RequestKind: &gvk, RequestResource: &gvr,
			Namespace: pod.Namespace, Name: pod.Name, Operation: admissionv1.Create,
			UserInfo: authenticationv1.UserInfo{
				Username: "system:serviceaccount:kube-system:replicaset-controller",
				UID:      "2d0e7c51-63a8-4f0b-b7c9-4e18d5a6f203",
				Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
			},
			Object:  runtime.RawExtension{Raw: raw},
			DryRun:  &dryRun,
			Options: runtime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}`)},
		},
	}
	body, err = json.Marshal(review)
	if err != nil {
		return nil, nil, err
	}
	marker := []byte(`"uid":"` + uidTemplate + `"`)
	if bytes.Count(body, marker) != 1 {
		return nil, nil, fmt.Errorf("the request uid is not found exactly once in the AdmissionReview")
	}
	want := 1
	if _, ok := pod.Labels[distinctLabel]; ok {
		want++
	}
	for from := 0; ; {
		i := bytes.Index(body[from:], []byte(uidTemplate))
		if i < 0 {
			break
		}
		uidAt = append(uidAt, from+i)
		from += i + len(uidTemplate)
	}
	if len(uidAt) != want || uidAt[0] != bytes.Index(body, marker)+len(`"uid":"`) {
		return nil, nil, fmt.Errorf("the uid template is found %d times in the AdmissionReview, not %d, the request uid first", len(uidAt), want)
	}
	return body, uidAt, nil
}

const hexDigits = "0123456789abcdef"

// stampUID writes a uid unique to (worker, seq) over the template's: 8 hex digits of the worker
// and the last 12 of the sequence number, in place, UUID-shaped (version 4, variant 1 digits kept).
// It costs a few nanoseconds, so every request gets a fresh uid, as from the API server, and the
// client can tell that each answer is its own request's.
func stampUID(uid []byte, worker uint32, seq uint64) {
	for i := 7; i >= 0; i-- {
		uid[i] = hexDigits[worker&0xf]
		worker >>= 4
	}
	for i := 35; i >= 24; i-- {
		uid[i] = hexDigits[seq&0xf]
		seq >>= 4
	}
}
