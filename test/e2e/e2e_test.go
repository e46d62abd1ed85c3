package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/sidecarset/hashes"
)

const timeout = 15 * time.Second

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func namespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	require.NoError(t, cluster.Client.Create(ctx(t), ns))
}

func sidecarSet(name string, selector map[string]string, container string, mutate ...func(*v1beta1.SidecarSet)) *v1beta1.SidecarSet {
	ss := &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: selector},
			Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: container, Image: "example.com/" + container + ":1.0"}}},
		},
	}
	for _, m := range mutate {
		m(ss)
	}
	return ss
}

func pod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1.0"}}},
	}
}

func containerNames(p *corev1.Pod) []string {
	var out []string
	for _, c := range p.Spec.Containers {
		out = append(out, c.Name)
	}
	return out
}

// eventually retries f until it returns nil: the manager compiles policy changes asynchronously
// (debounced), so a new SidecarSet or Namespace label takes effect shortly after it is stored.
// Probes go through the API server with dry-run, which calls the webhooks but stores nothing.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	// Testify's EventuallyWithT reports the last failure, which names what the system still lacks.
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.NoError(c, f(), what) }, timeout, 100*time.Millisecond, what)
}

// dryRunPod asks the API server to admit p without storing it and returns what it would store.
func dryRunPod(t *testing.T, p *corev1.Pod) (*corev1.Pod, error) {
	c := p.DeepCopy()
	err := cluster.Client.Create(ctx(t), c, client.DryRunAll)
	return c, err
}

func waitInjected(t *testing.T, p *corev1.Pod, container string) {
	t.Helper()
	eventually(t, "pod "+p.Name+" injected with "+container, func() error {
		got, err := dryRunPod(t, p)
		if err != nil {
			return err
		}
		if !contains(containerNames(got), container) {
			return fmt.Errorf("containers %v", containerNames(got))
		}
		return nil
	})
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func TestSidecarSetStoredDefaultedWithHashes(t *testing.T) {
	ss := sidecarSet("e2e-defaulted", map[string]string{"app": "defaulted"}, "agent")
	require.NoError(t, cluster.Client.Create(ctx(t), ss))
	var stored v1beta1.SidecarSet
	require.NoError(t, cluster.Client.Get(ctx(t), client.ObjectKey{Name: ss.Name}, &stored))

	c := stored.Spec.Containers[0]
	assert.Equal(t, v1beta1.BeforeAppContainerType, c.PodInjectPolicy)
	assert.Equal(t, v1beta1.SidecarContainerColdUpgrade, c.UpgradeStrategy.UpgradeType)
	assert.Equal(t, v1beta1.ShareVolumePolicyDisabled, c.ShareVolumePolicy.Type)
	assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy)
	assert.Equal(t, v1beta1.RollingUpdateSidecarSetStrategyType, stored.Spec.UpdateStrategy.Type)
	require.NotNil(t, stored.Spec.RevisionHistoryLimit)
	assert.Equal(t, int32(10), *stored.Spec.RevisionHistoryLimit)
	// The stored annotations are the hashes of the stored (defaulted) spec.
	want, err := hashes.SidecarSetHash(&stored)
	require.NoError(t, err)
	wantNoImage, err := hashes.SidecarSetHashWithoutImage(&stored)
	require.NoError(t, err)
	assert.Equal(t, want, stored.Annotations[v1beta1.SidecarSetHashAnnotation])
	assert.Equal(t, wantNoImage, stored.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation])
}

func TestPodStoredInjected(t *testing.T) {
	namespace(t, "e2e-inject", nil)
	ss := sidecarSet("e2e-logging", map[string]string{"app": "web"}, "log-agent", func(ss *v1beta1.SidecarSet) {
		ss.Spec.Containers[0].PodInjectPolicy = v1beta1.AfterAppContainerType
	})
	require.NoError(t, cluster.Client.Create(ctx(t), ss))
	p := pod("e2e-inject", "web-1", map[string]string{"app": "web"})
	waitInjected(t, p, "log-agent")

	require.NoError(t, cluster.Client.Create(ctx(t), p))
	var stored corev1.Pod
	require.NoError(t, cluster.Client.Get(ctx(t), client.ObjectKeyFromObject(p), &stored))
	assert.Equal(t, []string{"app", "log-agent"}, containerNames(&stored), "AfterAppContainer appends (compat §1.13)")
	assert.Contains(t, stored.Spec.Containers[1].Env, corev1.EnvVar{Name: "IS_INJECTED", Value: "true"})
	assert.Equal(t, "e2e-logging", stored.Annotations[v1beta1.SidecarSetListAnnotation])
	var hashes map[string]map[string]any
	require.NoError(t, json.Unmarshal([]byte(stored.Annotations[v1beta1.SidecarSetHashAnnotation]), &hashes))
	var storedSS v1beta1.SidecarSet
	require.NoError(t, cluster.Client.Get(ctx(t), client.ObjectKey{Name: ss.Name}, &storedSS))
	assert.Equal(t, storedSS.Annotations[v1beta1.SidecarSetHashAnnotation], hashes["e2e-logging"]["hash"])

	other := pod("e2e-inject", "db-1", map[string]string{"app": "db"})
	require.NoError(t, cluster.Client.Create(ctx(t), other))
	require.NoError(t, cluster.Client.Get(ctx(t), client.ObjectKeyFromObject(other), &stored))
	assert.Equal(t, []string{"app"}, containerNames(&stored), "a pod no SidecarSet selects is stored as sent")
}

func TestInvalidSidecarSetDenied(t *testing.T) {
	ss := sidecarSet("e2e-invalid", map[string]string{"app": "x"}, "agent", func(ss *v1beta1.SidecarSet) {
		ss.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "missing", MountPath: "/m"}}
	})
	err := cluster.Client.Create(ctx(t), ss)
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || strings.Contains(err.Error(), "denied"), "%v", err)
	assert.Contains(t, err.Error(), "spec.containers[0].volumeMounts[0].name")
}

func TestConflictingSidecarSetDenied(t *testing.T) {
	require.NoError(t, cluster.Client.Create(ctx(t), sidecarSet("e2e-mesh-a", map[string]string{"mesh": "on"}, "proxy")))
	eventually(t, "conflict with e2e-mesh-a reported", func() error {
		err := cluster.Client.Create(ctx(t), sidecarSet("e2e-mesh-b", map[string]string{"mesh": "on", "tier": "web"}, "proxy"), client.DryRunAll)
		if err == nil {
			return fmt.Errorf("admitted")
		}
		if !strings.Contains(err.Error(), "container proxy already exist in e2e-mesh-a") || !strings.Contains(err.Error(), "spec.containers[0].name") {
			return err
		}
		return nil
	})
}

func TestWhitelistBundleFromDisk(t *testing.T) {
	patching := func(name, key string) *v1beta1.SidecarSet {
		return sidecarSet(name, map[string]string{"app": name}, "c", func(ss *v1beta1.SidecarSet) {
			ss.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{key: "v"}}}
		})
	}
	err := cluster.Client.Create(ctx(t), patching("e2e-patch-b", "e2e.example.com/other"), client.DryRunAll)
	require.Error(t, err, "a key the whitelist does not allow is denied")
	assert.Contains(t, err.Error(), "spec.patchPodMetadata[0].annotations[e2e.example.com/other]")
	require.NoError(t, cluster.Client.Create(ctx(t), patching("e2e-patch-a", "e2e.example.com/allowed"), client.DryRunAll))

	// An unsigned bundle, and one signed with a key the manager does not trust, are refused
	// (verification keys are configured): the last good bundle keeps serving.
	var otherKey string
	_, err = keyPair(&otherKey)
	require.NoError(t, err)
	for _, key := range []string{"", otherKey} {
		require.NoError(t, writeWhitelist(whitelistPath, key, "^e2e\\.example\\.com/"))
		time.Sleep(time.Second) // several poll intervals: had it been activated, the next check would pass
		err = cluster.Client.Create(ctx(t), patching("e2e-patch-b", "e2e.example.com/other"), client.DryRunAll)
		require.Error(t, err, "a bundle without a trusted signature must not be active")
		require.NoError(t, cluster.Client.Create(ctx(t), patching("e2e-patch-a", "e2e.example.com/allowed"), client.DryRunAll), "the last good bundle still serves")
	}

	// A signed change on disk takes effect without a restart.
	require.NoError(t, writeWhitelist(whitelistPath, signingKey, "^e2e\\.example\\.com/"))
	eventually(t, "the new whitelist allows e2e.example.com/other", func() error {
		return cluster.Client.Create(ctx(t), patching("e2e-patch-b", "e2e.example.com/other"), client.DryRunAll)
	})
}

func TestNamespaceSelectorFollowsNamespaceLabels(t *testing.T) {
	namespace(t, "e2e-tracing", nil)
	require.NoError(t, cluster.Client.Create(ctx(t), sidecarSet("e2e-tracing", map[string]string{"app": "traced"}, "tracer", func(ss *v1beta1.SidecarSet) {
		ss.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tracing": "on"}}
	})))
	p := pod("e2e-tracing", "t-1", map[string]string{"app": "traced"})
	// The SidecarSet exists but the namespace is not labelled: wait for it to be compiled by checking
	// a SidecarSet created after it is, then confirm the pod is still not injected.
	time.Sleep(500 * time.Millisecond)
	got, err := dryRunPod(t, p)
	require.NoError(t, err)
	assert.Equal(t, []string{"app"}, containerNames(got))

	var ns corev1.Namespace
	require.NoError(t, cluster.Client.Get(ctx(t), client.ObjectKey{Name: "e2e-tracing"}, &ns))
	ns.Labels = map[string]string{"tracing": "on"}
	require.NoError(t, cluster.Client.Update(ctx(t), &ns))
	waitInjected(t, p, "tracer")

	ns.Labels = map[string]string{}
	require.NoError(t, cluster.Client.Update(ctx(t), &ns))
	eventually(t, "label removed: no injection", func() error {
		got, err := dryRunPod(t, p)
		if err != nil {
			return err
		}
		if contains(containerNames(got), "tracer") {
			return fmt.Errorf("still injected")
		}
		return nil
	})
}

// A second registration of the same injector (as with two installations, or reinvocation) must not
// inject twice: injection is idempotent.
func TestTwinRegistrationsNeverDoubleInject(t *testing.T) {
	namespace(t, "e2e-twin", nil)
	require.NoError(t, cluster.Client.Create(ctx(t), sidecarSet("e2e-twin", map[string]string{"app": "twin"}, "twin-agent")))
	var m admissionregv1.MutatingWebhookConfiguration
	require.NoError(t, cluster.Client.Get(ctx(t), client.ObjectKey{Name: "sidecarops"}, &m))
	twin := &admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "sidecarops-twin"}}
	for _, w := range m.Webhooks {
		if strings.HasPrefix(w.Name, "mpod.") {
			w.Name = "mpod-twin.sidecarops.io"
			w.MatchConditions, w.ObjectSelector = nil, nil // the manager keeps ours current, not the twin's
			twin.Webhooks = append(twin.Webhooks, w)
		}
	}
	require.Len(t, twin.Webhooks, 1)
	require.NoError(t, cluster.Client.Create(ctx(t), twin))
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), twin) })

	p := pod("e2e-twin", "twin-1", map[string]string{"app": "twin"})
	waitInjected(t, p, "twin-agent")
	require.NoError(t, cluster.Client.Create(ctx(t), p))
	var stored corev1.Pod
	require.NoError(t, cluster.Client.Get(ctx(t), client.ObjectKeyFromObject(p), &stored))
	assert.Equal(t, []string{"twin-agent", "app"}, containerNames(&stored))
	assert.Equal(t, "e2e-twin", stored.Annotations[v1beta1.SidecarSetListAnnotation])
}

// With the webhook unreachable, the API server applies the configured failurePolicy: Fail refuses
// the pod, Ignore admits it uninjected. The configurations are ours with the URL pointed at a port
// nothing listens on, scoped to one namespace each.
func TestFailurePolicyWhenWebhookIsDown(t *testing.T) {
	var m admissionregv1.MutatingWebhookConfiguration
	require.NoError(t, cluster.Client.Get(ctx(t), client.ObjectKey{Name: "sidecarops"}, &m))
	var podHook admissionregv1.MutatingWebhook
	for _, w := range m.Webhooks {
		if strings.HasPrefix(w.Name, "mpod.") {
			podHook = w
		}
	}
	require.NotNil(t, podHook.ClientConfig.URL, "envtest points the webhooks at this process by URL")
	dead := deadURL(t, *podHook.ClientConfig.URL)
	for _, policy := range []admissionregv1.FailurePolicyType{admissionregv1.Fail, admissionregv1.Ignore} {
		ns := "e2e-down-" + strings.ToLower(string(policy))
		namespace(t, ns, nil)
		w := podHook.DeepCopy()
		w.Name = "mpod-down-" + strings.ToLower(string(policy)) + ".sidecarops.io"
		w.ClientConfig.URL = &dead
		w.FailurePolicy = &policy
		w.MatchConditions, w.ObjectSelector = nil, nil // the pod is one no SidecarSet selects: the prefilter would skip the call
		w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
		cfg := &admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "sidecarops-down-" + strings.ToLower(string(policy))}, Webhooks: []admissionregv1.MutatingWebhook{*w}}
		require.NoError(t, cluster.Client.Create(ctx(t), cfg))
		t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), cfg) })

		p := pod(ns, "p", map[string]string{"app": "whatever"})
		eventually(t, "failurePolicy "+string(policy), func() error {
			_, err := dryRunPod(t, p)
			switch {
			case policy == admissionregv1.Fail && err == nil:
				return fmt.Errorf("pod admitted although the webhook is down")
			case policy == admissionregv1.Fail && !strings.Contains(err.Error(), "failed calling webhook"):
				return fmt.Errorf("unexpected error: %w", err)
			case policy == admissionregv1.Ignore && err != nil:
				return err
			}
			return nil
		})
	}
}
