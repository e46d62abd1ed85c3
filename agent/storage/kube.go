package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
)

var (
	podsGVR       = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// Kube writes results through the dynamic client, as the agent's own ServiceAccount.
type Kube struct {
	Client dynamic.Interface
	Self   Self
	// Now stamps pod conditions; time.Now when nil.
	Now func() time.Time
}

// Store writes r where c says: the pod's metadata, its condition, then the target. Every
// destination is tried even when an earlier one fails, so a missing target object does not keep
// the pod's markers from being written. It reports whether anything was written: false means
// every destination already held the value.
func (k *Kube) Store(ctx context.Context, c Config, r Record) (bool, error) {
	in := c.InKube
	if c.Type != TypeInKube || in == nil {
		return false, fmt.Errorf("storage: unsupported storageConfig type %q", c.Type)
	}
	var changed bool
	var errs []error
	note := func(ch bool, err error) {
		changed = changed || ch
		if err != nil {
			errs = append(errs, err)
		}
	}
	note(k.storePodMetadata(ctx, in, r))
	if in.ConditionType != "" {
		note(k.storePodCondition(ctx, in.ConditionType, r))
	}
	if in.Target != nil {
		note(k.storeTarget(ctx, in.Target, in.JSONPath, r.Value))
	}
	return changed, errors.Join(errs...)
}

func (k *Kube) pods() dynamic.ResourceInterface {
	return k.Client.Resource(podsGVR).Namespace(k.Self.PodNamespace)
}

// Pod reads the agent's own pod.
func (k *Kube) Pod(ctx context.Context) (*corev1.Pod, error) {
	u, err := k.pods().Get(ctx, k.Self.PodName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("storage: reading pod %s/%s: %w", k.Self.PodNamespace, k.Self.PodName, err)
	}
	var pod corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pod); err != nil {
		return nil, fmt.Errorf("storage: decoding pod %s/%s: %w", k.Self.PodNamespace, k.Self.PodName, err)
	}
	return &pod, nil
}

// podMetadataPatch is the merge patch bringing labels and annotations to what in and r ask for, or
// nil when they already are.
func podMetadataPatch(pod *unstructured.Unstructured, in *InKubeConfig, r Record) map[string]any {
	labels, annotations := map[string]any{}, map[string]any{}
	want := func(have map[string]string, out map[string]any, key, v string) {
		if cur, ok := have[key]; !ok || cur != v {
			out[key] = v
		}
	}
	haveL, haveA := pod.GetLabels(), pod.GetAnnotations()
	if in.AnnotationKey != "" {
		want(haveA, annotations, in.AnnotationKey, r.Value)
	}
	if in.LabelKey != "" {
		want(haveL, labels, in.LabelKey, r.Value)
	}
	for _, m := range in.MarkerPolicies {
		if m.State != r.State {
			continue
		}
		for key, v := range m.Labels {
			want(haveL, labels, key, v)
		}
		for key, v := range m.Annotations {
			want(haveA, annotations, key, v)
		}
	}
	if len(labels) == 0 && len(annotations) == 0 {
		return nil
	}
	meta := map[string]any{"resourceVersion": pod.GetResourceVersion()}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	return map[string]any{"metadata": meta}
}

func (k *Kube) storePodMetadata(ctx context.Context, in *InKubeConfig, r Record) (bool, error) {
	var changed bool
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := k.pods().Get(ctx, k.Self.PodName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		patch := podMetadataPatch(pod, in, r)
		if patch == nil {
			changed = false
			return nil
		}
		changed = true
		return k.patch(ctx, k.pods(), k.Self.PodName, types.MergePatchType, patch)
	})
	if err != nil {
		return false, fmt.Errorf("storage: patching pod %s/%s metadata: %w", k.Self.PodNamespace, k.Self.PodName, err)
	}
	return changed, nil
}

func (k *Kube) storePodCondition(ctx context.Context, condType string, r Record) (bool, error) {
	status := corev1.ConditionFalse
	if r.OK {
		status = corev1.ConditionTrue
	}
	var changed bool
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := k.pods().Get(ctx, k.Self.PodName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, err := unstructured.NestedSlice(u.Object, "status", "conditions")
		if err != nil {
			return err
		}
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == condType {
				if m["status"] == string(status) && m["reason"] == r.State && m["message"] == r.Value {
					changed = false
					return nil
				}
			}
		}
		now := time.Now
		if k.Now != nil {
			now = k.Now
		}
		changed = true
		// Strategic merge keys pod conditions by type, so the other conditions are left alone.
		return k.patch(ctx, k.pods(), k.Self.PodName, types.StrategicMergePatchType, map[string]any{
			"metadata": map[string]any{"resourceVersion": u.GetResourceVersion()},
			"status": map[string]any{"conditions": []any{map[string]any{
				"type": condType, "status": string(status), "reason": r.State, "message": r.Value,
				"lastTransitionTime": now().UTC().Format(time.RFC3339),
			}}},
		}, "status")
	})
	if err != nil {
		return false, fmt.Errorf("storage: patching pod %s/%s condition %s: %w", k.Self.PodNamespace, k.Self.PodName, condType, err)
	}
	return changed, nil
}

func (k *Kube) storeTarget(ctx context.Context, t *Target, jsonPath, value string) (bool, error) {
	toks, err := ParsePointer(jsonPath)
	if err != nil {
		return false, fmt.Errorf("storage: jsonPath %q: %w", jsonPath, err)
	}
	name, ns := k.Self.Expand(t.Name), k.Self.Expand(t.Namespace)
	var ri dynamic.ResourceInterface = k.Client.Resource(t.GVR())
	if ns != "" {
		ri = k.Client.Resource(t.GVR()).Namespace(ns)
	}
	what := fmt.Sprintf("%s %s/%s", t.GVR().GroupResource(), ns, name)
	var changed bool
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := ri.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur, found, err := unstructured.NestedFieldNoCopy(obj.Object, toks...)
		if err != nil {
			return err
		}
		if found && cur == value {
			changed = false
			return nil
		}
		patch := any(value)
		for i := len(toks) - 1; i >= 0; i-- {
			patch = map[string]any{toks[i]: patch}
		}
		m := patch.(map[string]any)
		meta, _ := m["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			m["metadata"] = meta
		}
		meta["resourceVersion"] = obj.GetResourceVersion()
		changed = true
		return k.patch(ctx, ri, name, types.MergePatchType, m)
	})
	if err != nil {
		return false, fmt.Errorf("storage: writing %s %s: %w", what, jsonPath, err)
	}
	return changed, nil
}

func (k *Kube) patch(ctx context.Context, ri dynamic.ResourceInterface, name string, pt types.PatchType, patch map[string]any, sub ...string) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = ri.Patch(ctx, name, pt, data, metav1.PatchOptions{FieldManager: "sidecar-agent"}, sub...)
	return err
}

// GetKey reads key of ConfigMap name in the pod's namespace; a missing ConfigMap or key is found=false.
func (k *Kube) GetKey(ctx context.Context, name, key string) (value string, found bool, err error) {
	cm, err := k.Client.Resource(configMapsGVR).Namespace(k.Self.PodNamespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("storage: reading ConfigMap %s/%s: %w", k.Self.PodNamespace, name, err)
	}
	v, found, err := unstructured.NestedString(cm.Object, "data", key)
	if err != nil {
		return "", false, fmt.Errorf("storage: ConfigMap %s/%s data[%s]: %w", k.Self.PodNamespace, name, key, err)
	}
	return v, found, nil
}

// PutKey sets key of ConfigMap name in the pod's namespace, creating the ConfigMap when missing.
// Two agents racing to create it, or to patch it, retry against the winner's version.
func (k *Kube) PutKey(ctx context.Context, name, key, value string) (bool, error) {
	ri := k.Client.Resource(configMapsGVR).Namespace(k.Self.PodNamespace)
	var changed bool
	retriable := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	err := retry.OnError(retry.DefaultRetry, retriable, func() error {
		cm, err := ri.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			changed = true
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": name, "namespace": k.Self.PodNamespace},
				"data":     map[string]any{key: value},
			}}
			_, err = ri.Create(ctx, obj, metav1.CreateOptions{FieldManager: "sidecar-agent"})
			return err
		}
		if err != nil {
			return err
		}
		if cur, found, _ := unstructured.NestedString(cm.Object, "data", key); found && cur == value {
			changed = false
			return nil
		}
		changed = true
		return k.patch(ctx, ri, name, types.MergePatchType, map[string]any{
			"metadata": map[string]any{"resourceVersion": cm.GetResourceVersion()},
			"data":     map[string]any{key: value},
		})
	})
	if err != nil {
		return false, fmt.Errorf("storage: writing ConfigMap %s/%s data[%s]: %w", k.Self.PodNamespace, name, key, err)
	}
	return changed, nil
}
