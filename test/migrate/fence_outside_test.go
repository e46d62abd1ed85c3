package migrate

import (
	"encoding/base64"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/controller/rollout"
	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

// TestFenceOutsideOpenKruisesBehaviour makes, as OpenKruise's manager, the writes its ClusterRole
// allows on what sidecarops owns that none of its controllers makes: each is refused by the fence,
// or, for the SidecarSet CRD's conversion, admitted without effect, while sidecarops' manager may
// make the same write (a dry run). An ephemeral container is admitted, and shown to change nothing
// sidecarops reads. OpenKruise's own writes of the same kinds still go through: its webhook
// configurations, its other CRDs.
func TestFenceOutsideOpenKruisesBehaviour(t *testing.T) {
	c := cluster.Client
	createNamespaces(t, fenceNS, kruiseNS)
	grantKruiseRights(t, kruiseManager, sidecaropsManager)
	kruise := impersonate(t, kruiseManager, kruiseNS)
	ours := client.NewDryRunClient(impersonate(t, sidecaropsManager, devcluster.Namespace))

	ss := &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "fence-outside"},
		Spec: v1beta1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "fenced"}},
			Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: sidecar, Image: "example.com/proxy:1"}}},
		},
	}
	require.NoError(t, defaults.SidecarSetAndHash(ss))
	require.NoError(t, c.Create(ctx(t), ss))
	t.Cleanup(func() { _ = c.Delete(ctx(t), ss) })
	imagePod := injectedPod(t, "outside-image")
	ephemeralPod := injectedPod(t, "outside-ephemeral")

	// Stand-ins for sidecarops' webhook configurations (this cluster runs without them), and
	// OpenKruise's own.
	mutating := &admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "sidecarops"}}
	validating := &admissionregv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "sidecarops"}}
	standInWebhooks(t, mutating, validating)
	openKruise := installKruise(t)

	refusedWrites := []struct {
		what  string
		write write
		// What the refusal names.
		message []string
	}{
		{"creates a SidecarSet", func(t *testing.T, c client.Client) error {
			created := ss.DeepCopy()
			created.ObjectMeta = metav1.ObjectMeta{Name: "fence-created"}
			return c.Create(ctx(t), created)
		}, []string{"create, update or delete a SidecarSet"}},
		{"deletes a SidecarSet", func(t *testing.T, c client.Client) error {
			return c.Delete(ctx(t), ss.DeepCopy())
		}, []string{"create, update or delete a SidecarSet"}},
		// An upgrade sidecarops' controller would not see: the images, without the hash annotations.
		{"changes the images of sidecars and leaves the annotations alone", func(t *testing.T, c client.Client) error {
			p := &corev1.Pod{}
			if err := c.Get(ctx(t), client.ObjectKeyFromObject(imagePod), p); err != nil {
				return err
			}
			p.Spec.Containers[1].Image = "example.com/proxy:2"
			p.Spec.InitContainers[0].Image = "example.com/agent:2"
			return c.Update(ctx(t), p)
		}, []string{"image of a pod's injected sidecar (" + sidecar + ", " + nativeSidecar + ")"}},
		// The name sidecarops gives the first revision of the SidecarSet's spec, which it would take
		// for its own, taken first in the namespace where it keeps the history.
		{"takes the name of the SidecarSet's next revision", func(t *testing.T, c client.Client) error {
			squat, err := rollout.NewRevision(ss, kruiseNS, 1, 0)
			require.NoError(t, err)
			squat.Labels, squat.OwnerReferences = nil, nil
			return c.Create(ctx(t), squat)
		}, []string{"write a ControllerRevision in " + kruiseNS}},
		{"stops serving v1alpha1", func(t *testing.T, c client.Client) error {
			_, err := updateCRD(t, c, sidecarSetCRD, func(u *unstructured.Unstructured) {
				setServed(t, u, "v1alpha1", false)
			})
			return err
		}, []string{"served or stored (v1alpha1 served=true storage=false, v1beta1 served=true storage=true to " +
			"v1alpha1 served=false storage=false, v1beta1 served=true storage=true)"}},
		{"stores v1alpha1", func(t *testing.T, c client.Client) error {
			_, err := updateCRD(t, c, sidecarSetCRD, func(u *unstructured.Unstructured) {
				versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
				for _, v := range versions {
					v := v.(map[string]any)
					v["storage"] = v["name"] == "v1alpha1"
				}
				require.NoError(t, unstructured.SetNestedSlice(u.Object, versions, "spec", "versions"))
			})
			return err
		}, []string{"served or stored"}},
		// The pod webhook fails open: pods are created without their sidecars while sidecarops is down.
		{"patches sidecarops' MutatingWebhookConfiguration", func(t *testing.T, c client.Client) error {
			return c.Patch(ctx(t), mutating.DeepCopy(), client.RawPatch(types.JSONPatchType,
				[]byte(`[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]`)))
		}, []string{"webhook configuration other than its own (sidecarops)"}},
		{"deletes a webhook of sidecarops' ValidatingWebhookConfiguration", func(t *testing.T, c client.Client) error {
			return c.Patch(ctx(t), validating.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/webhooks/0"}]`)))
		}, []string{"webhook configuration other than its own (sidecarops)"}},
	}

	installFence(t)
	awaitFence(t, kruise)
	versions := crdVersions(t)
	for _, tc := range refusedWrites {
		t.Run(tc.what, func(t *testing.T) {
			err := tc.write(t, kruise)
			if assert.Error(t, err, "OpenKruise") {
				assert.True(t, apierrors.IsInvalid(err) || apierrors.IsForbidden(err), err)
				assert.Contains(t, err.Error(), fenceMessage+" ")
				for _, m := range tc.message {
					assert.Contains(t, err.Error(), m)
				}
			}
			assert.NoError(t, tc.write(t, ours), "sidecarops")
		})
	}
	t.Run("nothing refused changed", func(t *testing.T) {
		require.NoError(t, c.Get(ctx(t), client.ObjectKeyFromObject(ss), &v1beta1.SidecarSet{}))
		p := &corev1.Pod{}
		require.NoError(t, c.Get(ctx(t), client.ObjectKeyFromObject(imagePod), p))
		assert.Equal(t, imagePod.Spec.Containers, p.Spec.Containers)
		assert.Equal(t, imagePod.Spec.InitContainers, p.Spec.InitContainers)
		assert.Equal(t, versions, crdVersions(t))
		squat, err := rollout.NewRevision(ss, kruiseNS, 1, 0)
		require.NoError(t, err)
		assert.True(t, apierrors.IsNotFound(c.Get(ctx(t), client.ObjectKeyFromObject(squat), squat)), "no revision took the name")
		got := &admissionregv1.MutatingWebhookConfiguration{}
		require.NoError(t, c.Get(ctx(t), client.ObjectKeyFromObject(mutating), got))
		assert.Equal(t, admissionregv1.Fail, *got.Webhooks[0].FailurePolicy)
		gotV := &admissionregv1.ValidatingWebhookConfiguration{}
		require.NoError(t, c.Get(ctx(t), client.ObjectKeyFromObject(validating), gotV))
		assert.Len(t, gotV.Webhooks, 1)
	})

	// OpenKruise never changes a conversion's strategy (its crd.Ensure skips a CRD without a
	// webhook conversion); None would hand v1alpha1 readers the stored v1beta1 objects.
	t.Run("sets the SidecarSet CRD's conversion strategy to None", func(t *testing.T) {
		none := func(u *unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedMap(u.Object, map[string]any{"strategy": "None"}, "spec", "conversion"))
		}
		before, _, _ := unstructured.NestedMap(getCRD(t, c, sidecarSetCRD).Object, "spec", "conversion")
		_, err := updateCRD(t, kruise, sidecarSetCRD, none)
		assert.ErrorContains(t, err, "may not change the SidecarSet CRD's conversion strategy (Webhook to None)")
		got, _, _ := unstructured.NestedMap(getCRD(t, c, sidecarSetCRD).Object, "spec", "conversion")
		assert.Equal(t, before, got)
		t.Cleanup(func() {
			_, err := updateCRD(t, c, sidecarSetCRD, func(u *unstructured.Unstructured) {
				require.NoError(t, unstructured.SetNestedMap(u.Object, before, "spec", "conversion"))
			})
			require.NoError(t, err)
		})
		u, err := updateCRD(t, ours, sidecarSetCRD, none)
		require.NoError(t, err)
		got, _, _ = unstructured.NestedMap(u.Object, "spec", "conversion")
		assert.Equal(t, map[string]any{"strategy": "None"}, got, "sidecarops' write takes effect")
	})

	// OpenKruise's EphemeralJob adds ephemeral containers to the pods it selects, so the fence lets
	// them through: the subresource stores nothing of a pod but them, and no name of one may be a
	// sidecar's. What sidecarops reads of the pod (its containers, init containers, annotations and
	// status) stays as it was.
	t.Run("adds an ephemeral container", func(t *testing.T) {
		before := &corev1.Pod{}
		require.NoError(t, c.Get(ctx(t), client.ObjectKeyFromObject(ephemeralPod), before))
		ephemeral := func(name string) error {
			return kruise.SubResource("ephemeralcontainers").Patch(ctx(t), before.DeepCopy(), client.RawPatch(types.StrategicMergePatchType, []byte(`{
				"metadata": {"annotations": {"`+v1beta1.SidecarSetHashAnnotation+`": "{}"}},
				"spec": {
					"containers": [{"name": "`+sidecar+`", "image": "example.com/proxy:9"}],
					"ephemeralContainers": [{"name": "`+name+`", "image": "example.com/debug:1", "targetContainerName": "`+sidecar+`",
						"env": [{"name": "`+v1beta1.SidecarEnvInjected+`", "value": "true"}]}]}}`)))
		}
		require.NoError(t, ephemeral("debugger"), "OpenKruise's EphemeralJob")
		after := &corev1.Pod{}
		require.NoError(t, c.Get(ctx(t), client.ObjectKeyFromObject(ephemeralPod), after))
		require.Len(t, after.Spec.EphemeralContainers, 1)
		assert.Equal(t, "debugger", after.Spec.EphemeralContainers[0].Name)
		assert.Equal(t, before.Spec.Containers, after.Spec.Containers)
		assert.Equal(t, before.Spec.InitContainers, after.Spec.InitContainers)
		assert.Equal(t, before.Annotations, after.Annotations)
		assert.Equal(t, before.Status, after.Status)

		err := ephemeral(sidecar)
		if assert.Error(t, err, "an ephemeral container named as a sidecar") {
			assert.True(t, apierrors.IsInvalid(err), err)
			assert.Contains(t, err.Error(), "Duplicate value")
			assert.NotContains(t, err.Error(), fenceMessage)
		}
	})

	// The write OpenKruise's webhook controller makes at each certificate sync, on its own two
	// configurations: admitted, or its manager would exit.
	t.Run("OpenKruise writes its own webhook configurations", func(t *testing.T) {
		ca := base64.StdEncoding.EncodeToString(selfSignedCA(t))
		for _, o := range []client.Object{openKruise.mutating, openKruise.validating} {
			patch := `[{"op":"add","path":"/webhooks/0/clientConfig/caBundle","value":"` + ca + `"}]`
			require.NoError(t, kruise.Patch(ctx(t), o.DeepCopyObject().(client.Object), client.RawPatch(types.JSONPatchType, []byte(patch))), o.GetName())
		}
		got := &admissionregv1.MutatingWebhookConfiguration{}
		require.NoError(t, c.Get(ctx(t), client.ObjectKeyFromObject(openKruise.mutating), got))
		assert.NotEmpty(t, got.Webhooks[0].ClientConfig.CABundle)
	})

	// crd.Ensure writes the conversion of every CRD of OpenKruise's kinds; the fence keeps only the
	// SidecarSet CRD's, and no version of another.
	t.Run("OpenKruise writes its other CRDs", func(t *testing.T) {
		crd := otherKruiseCRD(t)
		kruises := map[string]any{
			"conversionReviewVersions": []any{"v1", "v1beta1"},
			"clientConfig": map[string]any{
				"caBundle": base64.StdEncoding.EncodeToString(selfSignedCA(t)),
				"service":  map[string]any{"namespace": kruiseNS, "name": "kruise-webhook-service", "path": "/convert", "port": int64(443)},
			},
		}
		_, err := updateCRD(t, kruise, crd, func(u *unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedMap(u.Object, kruises, "spec", "conversion", "webhook"))
			setServed(t, u, "v1alpha1", false)
		})
		require.NoError(t, err)
		u := getCRD(t, c, crd)
		got, _, _ := unstructured.NestedMap(u.Object, "spec", "conversion", "webhook")
		assert.Equal(t, kruises, got)
		assert.Equal(t, []any{"v1alpha1 served=false", "v1beta1 served=true"}, servedVersions(t, u))
	})
}

// standInWebhooks creates webhook configurations of one webhook each, failing closed, that select
// no object, so that the API server never calls them.
func standInWebhooks(t *testing.T, m *admissionregv1.MutatingWebhookConfiguration, v *admissionregv1.ValidatingWebhookConfiguration) {
	cc := admissionregv1.WebhookClientConfig{Service: &admissionregv1.ServiceReference{Namespace: devcluster.Namespace, Name: "sidecarops-webhook", Path: ptr.To("/")}}
	nothing := &metav1.LabelSelector{MatchLabels: map[string]string{"selects": "nothing"}}
	rules := []admissionregv1.RuleWithOperations{{
		Operations: []admissionregv1.OperationType{admissionregv1.Create},
		Rule:       admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
	m.Webhooks = []admissionregv1.MutatingWebhook{{Name: "mpod.sidecarops.io", ClientConfig: cc, Rules: rules, ObjectSelector: nothing,
		FailurePolicy: ptr.To(admissionregv1.Fail), SideEffects: ptr.To(admissionregv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"}}}
	v.Webhooks = []admissionregv1.ValidatingWebhook{{Name: "vpod.sidecarops.io", ClientConfig: cc, Rules: rules, ObjectSelector: nothing,
		FailurePolicy: ptr.To(admissionregv1.Fail), SideEffects: ptr.To(admissionregv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"}}}
	for _, o := range []client.Object{m, v} {
		require.NoError(t, cluster.Client.Create(ctx(t), o))
		t.Cleanup(func() { _ = cluster.Client.Delete(ctx(t), o) })
	}
}

// otherKruiseCRD creates a CRD of another OpenKruise kind with two versions and a webhook
// conversion, as OpenKruise's Advanced StatefulSet has, and returns its name.
func otherKruiseCRD(t *testing.T) string {
	version := func(name string, storage bool) map[string]any {
		return map[string]any{"name": name, "served": true, "storage": storage,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "statefulsets.apps.kruise.io"},
		"spec": map[string]any{
			"group":    "apps.kruise.io",
			"names":    map[string]any{"kind": "StatefulSet", "listKind": "StatefulSetList", "plural": "statefulsets", "singular": "statefulset"},
			"scope":    "Namespaced",
			"versions": []any{version("v1alpha1", false), version("v1beta1", true)},
			"conversion": map[string]any{"strategy": "Webhook", "webhook": map[string]any{
				"conversionReviewVersions": []any{"v1"},
				"clientConfig":             map[string]any{"url": "https://kruise.example.com/convert"},
			}},
		},
	}}
	require.NoError(t, cluster.Client.Create(ctx(t), u))
	t.Cleanup(func() { _ = cluster.Client.Delete(ctx(t), u) })
	return u.GetName()
}

// setServed sets whether the CRD u serves version.
func setServed(t *testing.T, u *unstructured.Unstructured, version string, served bool) {
	versions, _, err := unstructured.NestedSlice(u.Object, "spec", "versions")
	require.NoError(t, err)
	for _, v := range versions {
		if v := v.(map[string]any); v["name"] == version {
			v["served"] = served
		}
	}
	require.NoError(t, unstructured.SetNestedSlice(u.Object, versions, "spec", "versions"))
}

// servedVersions says which versions CRD u serves, as "name served=bool".
func servedVersions(t *testing.T, u *unstructured.Unstructured) []any {
	versions, _, err := unstructured.NestedSlice(u.Object, "spec", "versions")
	require.NoError(t, err)
	out := make([]any, 0, len(versions))
	for _, v := range versions {
		v := v.(map[string]any)
		out = append(out, v["name"].(string)+" served="+strconv.FormatBool(v["served"].(bool)))
	}
	return out
}

// crdVersions is the SidecarSet CRD's versions, schemas and all.
func crdVersions(t *testing.T) []any {
	versions, _, err := unstructured.NestedSlice(getCRD(t, cluster.Client, sidecarSetCRD).Object, "spec", "versions")
	require.NoError(t, err)
	return versions
}
