package migrate

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/internal/testing/render"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

const (
	fenceNS = "fence"
	// kruiseManager is the username of OpenKruise's manager as its chart installs it: the literal
	// the openkruise-fence component names.
	kruiseManager     = "system:serviceaccount:" + kruiseNS + ":kruise-manager"
	sidecaropsManager = "system:serviceaccount:" + devcluster.Namespace + ":sidecarops-manager"
	fenceMessage      = "sidecarops owns SidecarSets: OpenKruise's manager may not"
)

// A write to the cluster as one of OpenKruise's controllers makes it, by the client given.
type write func(t *testing.T, c client.Client) error

// TestFenceKeepsOpenKruiseToItsOtherWorkloads applies the openkruise-fence component (decision D10)
// and makes, as OpenKruise's manager ServiceAccount, the writes its controllers make: those of its
// SidecarSet controller are refused, and the same writes by anyone else (here sidecarops' manager)
// are admitted; those of its CloneSet controller are admitted. OpenKruise's webhook controller's
// write of the SidecarSet CRD's conversion is admitted and changes nothing.
func TestFenceKeepsOpenKruiseToItsOtherWorkloads(t *testing.T) {
	c := cluster.Client
	createNamespaces(t, fenceNS)
	grantKruiseRights(t, kruiseManager, sidecaropsManager)
	kruise := impersonate(t, kruiseManager, kruiseNS)
	other := impersonate(t, sidecaropsManager, devcluster.Namespace)

	ss := &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "fence"},
		Spec: v1beta1.SidecarSetSpec{
			Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": "fenced"}},
			NamespaceSelector: v1beta1.NamespaceNamed(fenceNS),
			Containers:        []v1beta1.SidecarContainer{{Container: corev1.Container{Name: sidecar, Image: "example.com/proxy:1"}}},
		},
	}
	require.NoError(t, defaults.SidecarSetAndHash(ss))
	require.NoError(t, c.Create(ctx(t), ss))
	t.Cleanup(func() { _ = c.Delete(ctx(t), ss) })

	// Each case writes a pod of its own, created as both webhooks inject it, so that no case sees
	// another's write.
	pods := map[string]*corev1.Pod{}
	pod := func(name string) *corev1.Pod {
		if pods[name] == nil {
			pods[name] = injectedPod(t, name)
		}
		return pods[name]
	}
	// updatePod writes the pod as OpenKruise's controllers do: a full update of a fresh copy.
	updatePod := func(name string, change func(*corev1.Pod)) write {
		return func(t *testing.T, c client.Client) error {
			p := &corev1.Pod{}
			if err := c.Get(ctx(t), client.ObjectKeyFromObject(pod(name)), p); err != nil {
				return err
			}
			change(p)
			return c.Update(ctx(t), p)
		}
	}
	patchStatus := func(name, body string) write {
		return func(t *testing.T, c client.Client) error {
			return c.Status().Patch(ctx(t), pod(name).DeepCopy(), client.RawPatch(types.StrategicMergePatchType, []byte(body)))
		}
	}
	revision := func(name string, labels map[string]string) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{Namespace: fenceNS, Name: name, Labels: labels},
			Data:       runtime.RawExtension{Raw: []byte(`{"spec":{"$patch":"replace"}}`)},
			Revision:   1,
		}
	}
	// A revision the SidecarSet controller recorded earlier, for its history truncation to delete.
	old := revision("fence-old", map[string]string{v1beta1.SidecarSetNameLabel: ss.Name})
	require.NoError(t, c.Create(ctx(t), old))
	t.Cleanup(func() {
		for _, name := range []string{"fence-old", "fence-new", "cloneset-new"} {
			_ = c.Delete(ctx(t), revision(name, nil))
		}
	})

	sidecarSetWrites := []struct {
		what  string
		write write
		// What the refusal names: its reason, and the annotations in any order.
		message []string
	}{
		{"the SidecarSet controller upgrades a sidecar in place", updatePod("upgrade", func(p *corev1.Pod) {
			p.Spec.Containers[1].Image = "example.com/proxy:2"
			p.Annotations[v1beta1.SidecarSetHashAnnotation] = hashAnnotation("h2", "fence-2")
			p.Annotations[v1beta1.SidecarSetInplaceUpdateStateAnnotation] = `{"fence":{"revision":"h2","updateTimestamp":"2026-01-02T00:00:00Z",` +
				`"lastContainerStatuses":{"proxy":{"imageID":"example.com/proxy@sha256:1"}}}}`
		}), []string{"SidecarSet annotations", v1beta1.SidecarSetHashAnnotation, v1beta1.SidecarSetInplaceUpdateStateAnnotation}},
		// The reset of a hot-upgrade twin leaves the hash alone: the version annotations give it away.
		{"the SidecarSet controller resets a hot-upgrade twin", updatePod("reset", func(p *corev1.Pod) {
			p.Spec.Containers[3].Image = "example.com/empty:1"
			p.Annotations[v1beta1.SidecarSetVersionAnnotationPrefix+"envoy-1"] = "0"
			p.Annotations[v1beta1.SidecarSetVersionAltAnnotationPrefix+"envoy-2"] = "0"
		}), []string{"SidecarSet annotations", v1beta1.SidecarSetVersionAnnotationPrefix + "envoy-1", v1beta1.SidecarSetVersionAltAnnotationPrefix + "envoy-2"}},
		// An upgrade also adds to the injected list the SidecarSets matching the pod.
		{"the SidecarSet controller adds to the injected list", updatePod("list", func(p *corev1.Pod) {
			p.Annotations[v1beta1.SidecarSetListAnnotation] = "fence,mesh"
		}), []string{"SidecarSet annotations", v1beta1.SidecarSetListAnnotation}},
		{"the SidecarSet controller marks a pod upgradable", patchStatus("upgradable",
			`{"status":{"conditions":[{"type":"SidecarSetUpgradable","status":"True","reason":"AllSidecarsetUpgradable","message":"{\"fence\":true}"}]}}`),
			[]string{"SidecarSetUpgradable condition"}},
		{"the SidecarSet controller writes the SidecarSet's status", func(t *testing.T, c client.Client) error {
			s := &v1beta1.SidecarSet{}
			if err := c.Get(ctx(t), client.ObjectKeyFromObject(ss), s); err != nil {
				return err
			}
			s.Status.MatchedPods++
			s.Status.ObservedGeneration = s.Generation
			return c.Status().Update(ctx(t), s)
		}, []string{"create, update or delete a SidecarSet or update its status"}},
		{"the SidecarSet controller records a revision", func(t *testing.T, c client.Client) error {
			return c.Create(ctx(t), revision("fence-new", map[string]string{v1beta1.SidecarSetNameLabel: ss.Name, v1beta1.ControllerRevisionHashLabel: "new"}))
		}, []string{"write a SidecarSet's ControllerRevisions"}},
		{"the SidecarSet controller truncates the history", func(t *testing.T, c client.Client) error {
			return c.Delete(ctx(t), old.DeepCopy())
		}, []string{"write a SidecarSet's ControllerRevisions"}},
	}
	// A CloneSet's in-place update of its app container: the readiness gate's condition first, then
	// the image and the controller's state in an annotation, on a pod that carries SidecarSet
	// annotations it leaves alone. And the CloneSet's own revision.
	cloneSetWrites := []struct {
		what  string
		write write
	}{
		{"the CloneSet controller takes a pod out of service", patchStatus("cloneset",
			`{"status":{"conditions":[{"type":"InPlaceUpdateReady","status":"False","reason":"StartInPlaceUpdate"}]}}`)},
		{"the CloneSet controller updates the app container in place", updatePod("cloneset", func(p *corev1.Pod) {
			p.Spec.Containers[0].Image = "example.com/game:2"
			p.Labels["controller-revision-hash"] = "game-2"
			p.Annotations["apps.kruise.io/inplace-update-state"] = `{"revision":"game-2","updateTimestamp":"2026-01-02T00:00:00Z",` +
				`"lastContainerStatuses":{"game":{"imageID":"example.com/game@sha256:1"}}}`
		})},
		{"the CloneSet controller puts the pod back in service", patchStatus("cloneset",
			`{"status":{"conditions":[{"type":"InPlaceUpdateReady","status":"True"}]}}`)},
		{"the CloneSet controller records a revision", func(t *testing.T, c client.Client) error {
			return c.Create(ctx(t), revision("cloneset-new", map[string]string{"app": "game", v1beta1.ControllerRevisionHashLabel: "new"}))
		}},
	}

	installFence(t)
	awaitFence(t, kruise)

	for _, tc := range sidecarSetWrites {
		err := tc.write(t, kruise)
		if assert.Error(t, err, "OpenKruise: %s", tc.what) {
			assert.True(t, apierrors.IsInvalid(err) || apierrors.IsForbidden(err), "%s: %v", tc.what, err)
			assert.Contains(t, err.Error(), fenceMessage+" ", tc.what)
			for _, m := range tc.message {
				assert.Contains(t, err.Error(), m, tc.what)
			}
		}
		assert.NoError(t, tc.write(t, other), "sidecarops: %s", tc.what)
	}
	for _, tc := range cloneSetWrites {
		assert.NoError(t, tc.write(t, kruise), "OpenKruise: %s", tc.what)
	}
	got := &corev1.Pod{}
	require.NoError(t, c.Get(ctx(t), client.ObjectKeyFromObject(pod("cloneset")), got))
	assert.Equal(t, "example.com/game:2", got.Spec.Containers[0].Image, "the CloneSet's update took effect")
	assert.Equal(t, pod("cloneset").Annotations[v1beta1.SidecarSetHashAnnotation], got.Annotations[v1beta1.SidecarSetHashAnnotation])

	t.Run("the SidecarSet CRD's conversion", func(t *testing.T) {
		fenceKeepsTheConversion(t, kruise)
	})
}

// fenceKeepsTheConversion makes the write of OpenKruise's webhook controller, which points the
// conversion of every CRD of its kinds at its own Service with its own CA: admitted, as path B leaves
// the SidecarSet CRD's conversion to OpenKruise (its manager exits when that write is refused).
func fenceKeepsTheConversion(t *testing.T, kruise client.Client) {
	webhook := func(u *unstructured.Unstructured) map[string]any {
		m, _, err := unstructured.NestedMap(u.Object, "spec", "conversion", "webhook")
		require.NoError(t, err)
		return m
	}
	envtests := webhook(getCRD(t, cluster.Client, sidecarSetCRD))
	t.Cleanup(func() {
		_, err := updateCRD(t, cluster.Client, sidecarSetCRD, func(u *unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedMap(u.Object, runtime.DeepCopyJSON(envtests), "spec", "conversion", "webhook"))
		})
		require.NoError(t, err)
	})
	// As crd.Ensure of OpenKruise's webhook controller writes it: its Service, its CA.
	kruises := map[string]any{
		"conversionReviewVersions": []any{"v1", "v1beta1"},
		"clientConfig": map[string]any{
			"caBundle": base64.StdEncoding.EncodeToString(selfSignedCA(t)),
			"service":  map[string]any{"namespace": kruiseNS, "name": "kruise-webhook-service", "path": "/convert", "port": int64(443)},
		},
	}
	u, err := updateCRD(t, kruise, sidecarSetCRD, func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedMap(u.Object, runtime.DeepCopyJSON(kruises), "spec", "conversion", "webhook"))
	})
	require.NoError(t, err, "OpenKruise's manager starts its controllers only once this write has succeeded")
	assert.Equal(t, kruises, webhook(u))
}

// sidecarSetCRD is the name of the CRD sidecarops and OpenKruise serve SidecarSets by.
const sidecarSetCRD = "sidecarsets.apps.kruise.io"

// getCRD reads CRD name as client c sees it.
func getCRD(t *testing.T, c client.Client, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apiextensions.k8s.io/v1")
	u.SetKind("CustomResourceDefinition")
	require.NoError(t, c.Get(ctx(t), client.ObjectKey{Name: name}, u))
	return u
}

// updateCRD applies change to CRD name as client c, retrying on conflicts, and returns the CRD as
// the API server answered the update.
func updateCRD(t *testing.T, c client.Client, name string, change func(*unstructured.Unstructured), opts ...client.UpdateOption) (*unstructured.Unstructured, error) {
	var u *unstructured.Unstructured
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u = getCRD(t, c, name)
		change(u)
		return c.Update(ctx(t), u, opts...)
	})
	return u, err
}

// awaitFence waits until the API server enforces the fence's ValidatingAdmissionPolicy (it does
// once it has loaded it), with a dry run of a write it refuses to kruise.
func awaitFence(t *testing.T, kruise client.Client) {
	t.Helper()
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: fenceNS, Name: "fence-probe", Labels: map[string]string{v1beta1.SidecarSetNameLabel: "fence"}},
		Data:       runtime.RawExtension{Raw: []byte(`{}`)},
		Revision:   1,
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := kruise.Create(ctx(t), cr.DeepCopy(), client.DryRunAll)
		if assert.Error(c, err) {
			assert.Contains(c, err.Error(), fenceMessage)
		}
	}, time.Minute, 100*time.Millisecond, "the fence is in force")
}

// selfSignedCA is a PEM certificate, as the API server checks a caBundle is.
func selfSignedCA(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kruise-webhook-ca"}, IsCA: true,
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// nativeSidecar is injectedPod's sidecar in an init container.
const nativeSidecar = "agent"

// injectedPod creates, in the fence's namespace, a pod as the pod webhooks leave it: an app
// container, a sidecar, a hot-upgrade pair, a native sidecar, and OpenKruise's annotations for
// them. No node: nothing but the test writes it.
func injectedPod(t *testing.T, name string) *corev1.Pod {
	injected := []corev1.EnvVar{{Name: v1beta1.SidecarEnvInjected, Value: "true"}}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: fenceNS, Name: name, Labels: map[string]string{"app": "fenced"},
			Annotations: map[string]string{
				v1beta1.SidecarSetHashAnnotation:                         hashAnnotation("h1", "fence-1"),
				v1beta1.SidecarSetHashWithoutImageAnnotation:             hashAnnotation("w1", ""),
				v1beta1.SidecarSetListAnnotation:                         "fence",
				v1beta1.SidecarSetWorkingHotUpgradeContainer:             `{"envoy":"envoy-1"}`,
				v1beta1.SidecarSetVersionAnnotationPrefix + "envoy-1":    "1",
				v1beta1.SidecarSetVersionAltAnnotationPrefix + "envoy-1": "0",
				v1beta1.SidecarSetVersionAnnotationPrefix + "envoy-2":    "0",
				v1beta1.SidecarSetVersionAltAnnotationPrefix + "envoy-2": "1",
			}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{
				{Name: nativeSidecar, Image: "example.com/agent:1", Env: injected, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
			},
			Containers: []corev1.Container{
				{Name: "game", Image: "example.com/game:1"},
				{Name: sidecar, Image: "example.com/proxy:1", Env: injected},
				{Name: "envoy-1", Image: "example.com/envoy:1", Env: injected},
				{Name: "envoy-2", Image: "example.com/envoy:2", Env: injected},
			},
		},
	}
	require.NoError(t, cluster.Client.Create(ctx(t), p))
	t.Cleanup(func() { _ = cluster.Client.Delete(ctx(t), p) })
	return p
}

func hashAnnotation(hash, revision string) string {
	b, _ := json.Marshal(map[string]any{"fence": map[string]any{
		"hash": hash, "sidecarSetName": "fence", "sidecarList": []string{"envoy", sidecar},
		"updateTimestamp": "2026-01-01T00:00:00Z", "controllerRevision": revision,
	}})
	return string(b)
}

// grantKruiseRights gives users, by RBAC, what OpenKruise's ClusterRole grants its manager over
// the objects the fence is about, so that what refuses a write here is the fence, not RBAC.
func grantKruiseRights(t *testing.T, users ...string) {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "fence-kruise-manager"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"get", "update", "patch"}},
			// Its EphemeralJob controller's.
			{APIGroups: []string{""}, Resources: []string{"pods/ephemeralcontainers"}, Verbs: []string{"get", "update", "patch"}},
			{APIGroups: []string{"apps.kruise.io"}, Resources: []string{"sidecarsets"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"apps.kruise.io"}, Resources: []string{"sidecarsets/status"}, Verbs: []string{"get", "update", "patch"}},
			{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
			// Every webhook configuration, not only its own two.
			{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"},
				Verbs: []string{"get", "list", "watch", "update", "patch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "fence-kruise-manager"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
	}
	for _, u := range users {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: u})
	}
	for _, o := range []client.Object{role, binding} {
		require.NoError(t, cluster.Client.Create(ctx(t), o))
		t.Cleanup(func() { _ = cluster.Client.Delete(ctx(t), o) })
	}
}

// impersonate returns a client acting as the ServiceAccount user of namespace ns, with the groups
// the API server gives a ServiceAccount's token.
func impersonate(t *testing.T, user, ns string) client.Client {
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: cluster.Client.Scheme()})
	require.NoError(t, err)
	return c
}

// installFence creates the admission policies of config/samples/kruise-coexist (the
// openkruise-fence component) for the rest of the test.
func installFence(t *testing.T) {
	t.Helper()
	objs, err := render.Kustomize("../../config/samples/kruise-coexist")
	require.NoError(t, err)
	var installed []string
	for _, u := range objs {
		if kind := u.GetKind(); !strings.HasSuffix(kind, "AdmissionPolicy") && !strings.HasSuffix(kind, "AdmissionPolicyBinding") {
			continue
		}
		require.NoError(t, cluster.Client.Create(ctx(t), u), render.Key(u))
		t.Cleanup(func() { _ = cluster.Client.Delete(ctx(t), u) })
		installed = append(installed, render.Key(u))
	}
	assert.ElementsMatch(t, []string{"ValidatingAdmissionPolicy/sidecarops-openkruise-fence", "ValidatingAdmissionPolicyBinding/sidecarops-openkruise-fence"}, installed)
}
