package install

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/internal/testing/render"
	"github.com/sidecarops/sidecarops/manager"
	"github.com/sidecarops/sidecarops/webhook/prefilter"
)

const (
	root      = "../.."
	chartDir  = root + "/charts/sidecarops"
	namespace = "sidecarops-system"
	release   = "sidecarops"
)

// cluster is a real kube-apiserver and etcd that routes webhook calls to a Service's endpoints (as
// kube-proxy and cluster DNS would route them in a cluster) and nothing installed.
type cluster struct {
	c          client.Client
	kubeconfig string
	admin      []byte
	helmHome   string
}

func start(t *testing.T) *cluster {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run through `make test`, which builds kube-apiserver and etcd")
	}
	env := &envtest.Environment{}
	env.ControlPlane.GetAPIServer().Configure().Set("enable-aggregator-routing", "true")
	cfg, err := env.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	scheme, err := manager.Scheme()
	require.NoError(t, err)
	require.NoError(t, apiextensionsv1.AddToScheme(scheme))
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, env.KubeConfig, 0o600))
	return &cluster{c: c, kubeconfig: kubeconfig, admin: env.KubeConfig, helmHome: t.TempDir()}
}

// helm runs docs/install.md's helm commands against the cluster.
func (k *cluster) helm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := render.Helm(k.helmHome, append(args, "--kubeconfig", k.kubeconfig)...)
	require.NoError(t, err)
	return string(out)
}

func (k *cluster) kubectl(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("kubectl", append(args, "--kubeconfig", k.kubeconfig)...).CombinedOutput() // #nosec G204 -- docs/install.md's commands
	require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), out)
}

// manager runs the manager as the installed Deployment's container says, reachable through the
// installed Service.
func (k *cluster) manager(ctx context.Context, t *testing.T, bin, ip string) *container {
	t.Helper()
	d := &appsv1.Deployment{}
	require.NoError(t, k.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "sidecarops-manager"}, d))
	require.Equal(t, "sidecarops-manager", d.Spec.Template.Spec.ServiceAccountName)
	p := runContainer(t, k.c, d, bin, impersonating(t, k.admin, namespace, d.Spec.Template.Spec.ServiceAccountName), ip)
	svc := &corev1.Service{}
	require.NoError(t, k.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: manager.ServiceName}, svc))
	p.endpoints(ctx, t, k.c, svc, ip)
	return p
}

// docs/install.md's install, upgrade and uninstall, on a real API server: the chart of an earlier
// version installs a working sidecarops; upgrading to this one keeps SidecarSets, revisions, the
// certificates the manager wrote and the webhooks working; uninstalling leaves nothing that would
// block a pod.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	ctx := t.Context()
	ip := hostIP(t)
	k := start(t)
	bin, err := devcluster.Build(root, "sidecarops-manager", t.TempDir())
	require.NoError(t, err)

	// An earlier release: this chart packaged with a lower version number.
	previous := t.TempDir()
	k.helm(t, "package", chartDir, "--version", "0.0.1", "--destination", previous)
	out := k.helm(t, "install", release, filepath.Join(previous, "sidecarops-0.0.1.tgz"), "--namespace", namespace, "--create-namespace")
	assert.Contains(t, out, "STATUS: deployed")
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, k.c.Get(ctx, client.ObjectKey{Name: manager.CRDName}, crd))
	assert.Equal(t, "sidecarops-0.0.1", crd.Labels["helm.sh/chart"])
	applied := false
	for _, f := range crd.ManagedFields {
		applied = applied || f.Manager == "helm" && f.Operation == metav1.ManagedFieldsOperationApply
	}
	assert.True(t, applied, "helm applies server-side: %+v", crd.ManagedFields)

	mgr := k.manager(ctx, t, bin, ip)
	waitCABundles(ctx, t, k.c)

	ss := createSidecarSet(ctx, t, k.c)
	assertInjected(ctx, t, k.c, "before-upgrade", true)
	revisions := waitRevisions(ctx, t, k.c)

	// Upgrade to this chart. Server-side apply leaves what the manager wrote (caBundle, the pod
	// webhook's filter) alone; the pod template is unchanged, so the replica keeps running.
	before := deployment(ctx, t, k.c)
	out = k.helm(t, "upgrade", release, chartDir, "--namespace", namespace)
	assert.Contains(t, out, "STATUS: deployed")
	after := deployment(ctx, t, k.c)
	assert.Equal(t, before.Spec.Template, after.Spec.Template, "nothing to roll: the manager keeps running")
	require.NoError(t, k.c.Get(ctx, client.ObjectKey{Name: manager.CRDName}, crd))
	assert.Equal(t, "sidecarops-0.1.0", crd.Labels["helm.sh/chart"])
	assert.NotEmpty(t, crd.Spec.Conversion.Webhook.ClientConfig.CABundle, "the conversion webhook's CA survives the upgrade")
	mwc := &admissionregv1.MutatingWebhookConfiguration{}
	require.NoError(t, k.c.Get(ctx, client.ObjectKey{Name: manager.WebhookConfigurationName}, mwc))
	for _, w := range mwc.Webhooks {
		assert.NotEmpty(t, w.ClientConfig.CABundle, "%s: the CA survives the upgrade", w.Name)
	}
	// One SidecarSet: the prefilter's filter is its selector, registered as the object selector.
	filter, _ := prefilter.Registered(mwc, manager.PodWebhookName)
	assert.NotNil(t, filter.Selector, "the prefilter's object selector survives the upgrade: %+v", filter)
	got := &v1beta1.SidecarSet{}
	require.NoError(t, k.c.Get(ctx, client.ObjectKey{Name: ss.Name}, got))
	assert.Equal(t, ss.Annotations[v1beta1.SidecarSetHashAnnotation], got.Annotations[v1beta1.SidecarSetHashAnnotation])
	assert.Equal(t, revisions, waitRevisions(ctx, t, k.c), "the same revisions")
	assertInjected(ctx, t, k.c, "after-upgrade", true)

	// A restarted replica (a rollout of the upgraded Deployment) serves from the upgraded manifest.
	mgr.terminate(t)
	k.manager(ctx, t, bin, ip)
	assertInjected(ctx, t, k.c, "after-restart", true)

	// An administrator's object selector (webhookConfiguration.objectSelector) takes the pod webhook's
	// selector from the prefilter, which keeps to its match condition beside it and leaves the
	// selector to the chart; without it again, the prefilter's selector comes back. The selector
	// is the prefilter's until then, so Helm's server-side apply needs --force-conflicts to take it
	// (docs/install.md, "Selecting pods").
	upgrade := []string{"upgrade", release, chartDir, "--namespace", namespace, "--set", "webhookConfiguration.objectSelector.matchLabels.sidecars=enabled"}
	_, err = render.Helm(k.helmHome, append(upgrade, "--kubeconfig", k.kubeconfig)...)
	require.Error(t, err)
	assert.ErrorContains(t, err, `conflict with "sidecarops-prefilter": .webhooks[name="mpod.sidecarops.io"].objectSelector`)
	k.helm(t, append(upgrade, "--force-conflicts")...)
	assertFilter(ctx, t, k.c, &metav1.LabelSelector{MatchLabels: map[string]string{"sidecars": "enabled"}}, true)
	selected := webPod("selected")
	selected.Labels["sidecars"] = "enabled"
	require.NoError(t, createEventually(ctx, k.c, selected))
	assert.Len(t, selected.Spec.Containers, 2, "a pod of the administrator's selector is injected")
	assertInjected(ctx, t, k.c, "not-selected", false)
	assertFilter(ctx, t, k.c, &metav1.LabelSelector{MatchLabels: map[string]string{"sidecars": "enabled"}}, true)
	// Without values, helm upgrade would reuse the release's.
	k.helm(t, "upgrade", release, chartDir, "--namespace", namespace, "--reset-values")
	assertFilter(ctx, t, k.c, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}},
	}}, false)
	assertInjected(ctx, t, k.c, "selector-removed", true)

	// Uninstall: no webhook configuration is left to refuse pods; the CRD and its SidecarSets stay.
	k.helm(t, "uninstall", release, "--namespace", namespace)
	for _, o := range []client.Object{&admissionregv1.MutatingWebhookConfiguration{}, &admissionregv1.ValidatingWebhookConfiguration{}} {
		err := k.c.Get(ctx, client.ObjectKey{Name: manager.WebhookConfigurationName}, o)
		assert.True(t, apierrors.IsNotFound(err), "%T left behind: %v", o, err)
	}
	assertInjected(ctx, t, k.c, "after-uninstall", false)
	require.NoError(t, k.c.Get(ctx, client.ObjectKey{Name: manager.CRDName}, crd), "the CRD is kept (crd.keep)")
	require.NoError(t, k.c.Get(ctx, client.ObjectKey{Name: ss.Name}, got), "and so are the SidecarSets")
}

// createSidecarSet creates namespace web and the SidecarSet logging, which injects a log-agent
// into its pods labelled app=web, through the installed webhooks, and waits until the pod webhook
// injects it.
func createSidecarSet(ctx context.Context, t *testing.T, c client.Client) *v1beta1.SidecarSet {
	t.Helper()
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}}))
	ss := &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "logging"},
		Spec: v1beta1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "log-agent", Image: "example.com/log-agent:1"}}},
		},
	}
	// The SidecarSet webhooks are called through the Service: defaulted and validated on create.
	require.NoError(t, createEventually(ctx, c, ss))
	assert.NotEmpty(t, ss.Annotations[v1beta1.SidecarSetHashAnnotation], "defaulted by the mutating webhook")
	// The pod webhook injects once its policy snapshot holds the SidecarSet (compiled a moment
	// after the SidecarSet is stored): asked with dry runs, which store nothing.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		pod := webPod("dry-run")
		assert.NoError(ct, c.Create(ctx, pod, client.DryRunAll))
		assert.Len(ct, pod.Spec.Containers, 2)
	}, time.Minute, 100*time.Millisecond)
	return ss
}

// docs/install.md's other install: kubectl apply of config/default (a release's install.yaml is it,
// rendered with the image's digest), the network-policy overlay over it, and kubectl delete.
func TestKubectlApplyInstall(t *testing.T) {
	ctx := t.Context()
	ip := hostIP(t)
	k := start(t)
	bin, err := devcluster.Build(root, "sidecarops-manager", t.TempDir())
	require.NoError(t, err)
	k.kubectl(t, "apply", "--server-side", "-k", root+"/config/default")
	k.manager(ctx, t, bin, ip)
	waitCABundles(ctx, t, k.c)
	createSidecarSet(ctx, t, k.c)
	assertInjected(ctx, t, k.c, "applied", true)
	waitRevisions(ctx, t, k.c)

	// The opt-in NetworkPolicy on top (the API server validates it; nothing here enforces it), and
	// kubectl delete of that overlay, a superset of config/default.
	k.kubectl(t, "apply", "--server-side", "-k", root+"/config/samples/network-policy")
	np := &networkingv1.NetworkPolicy{}
	require.NoError(t, k.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "sidecarops-manager"}, np))
	assert.Len(t, np.Spec.Ingress, 2, "the webhook's rule and the metrics' rule")
	assertInjected(ctx, t, k.c, "network-policy", true)

	// The namespace would wait for a namespace controller this API server does not run.
	k.kubectl(t, "delete", "-k", root+"/config/samples/network-policy", "--wait=false")
	for _, o := range []client.Object{&admissionregv1.MutatingWebhookConfiguration{}, &admissionregv1.ValidatingWebhookConfiguration{}} {
		err := k.c.Get(ctx, client.ObjectKey{Name: manager.WebhookConfigurationName}, o)
		assert.True(t, apierrors.IsNotFound(err), "%T left behind: %v", o, err)
	}
	assertInjected(ctx, t, k.c, "deleted", false)
}

func deployment(ctx context.Context, t *testing.T, c client.Client) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "sidecarops-manager"}, d))
	return d
}

// waitCABundles waits until the manager's certificate rotator has written its CA into both webhook
// configurations and the CRD's conversion webhook.
func waitCABundles(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	require.Eventually(t, func() bool {
		m, v, crd := &admissionregv1.MutatingWebhookConfiguration{}, &admissionregv1.ValidatingWebhookConfiguration{}, &apiextensionsv1.CustomResourceDefinition{}
		if c.Get(ctx, client.ObjectKey{Name: manager.WebhookConfigurationName}, m) != nil ||
			c.Get(ctx, client.ObjectKey{Name: manager.WebhookConfigurationName}, v) != nil ||
			c.Get(ctx, client.ObjectKey{Name: manager.CRDName}, crd) != nil {
			return false
		}
		for _, w := range m.Webhooks {
			if len(w.ClientConfig.CABundle) == 0 {
				return false
			}
		}
		return len(v.Webhooks[0].ClientConfig.CABundle) > 0 && crd.Spec.Conversion.Webhook.ClientConfig != nil &&
			len(crd.Spec.Conversion.Webhook.ClientConfig.CABundle) > 0
	}, time.Minute, 200*time.Millisecond, "the rotator writes caBundle")
}

// createEventually creates obj, retrying while the API server cannot reach a webhook yet (its
// endpoint informer and the manager's certificate files catch up within seconds).
func createEventually(ctx context.Context, c client.Client, obj client.Object) error {
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if err = c.Create(ctx, obj); err == nil || !apierrors.IsInternalError(err) {
			return err
		}
	}
	return err
}

// assertInjected creates pod name in namespace web (labelled app=web) and checks whether it was
// stored with the logging SidecarSet's sidecar.
func assertInjected(ctx context.Context, t *testing.T, c client.Client, name string, want bool) {
	t.Helper()
	pod := webPod(name)
	require.NoError(t, createEventually(ctx, c, pod))
	names := []string{}
	for _, ctr := range pod.Spec.Containers {
		names = append(names, ctr.Name)
	}
	if want {
		// BeforeAppContainer, the default podInjectPolicy.
		assert.Equal(t, []string{"log-agent", "app"}, names, "%s: injected", name)
	} else {
		assert.Equal(t, []string{"app"}, names, "%s: created as sent", name)
	}
}

// assertFilter waits until the pod webhook's object selector is selector and the prefilter's match
// condition is registered or not (condition).
func assertFilter(ctx context.Context, t *testing.T, c client.Client, selector *metav1.LabelSelector, condition bool) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		mwc := &admissionregv1.MutatingWebhookConfiguration{}
		require.NoError(ct, c.Get(ctx, client.ObjectKey{Name: manager.WebhookConfigurationName}, mwc))
		filter, _ := prefilter.Registered(mwc, manager.PodWebhookName)
		assert.Equal(ct, selector, filter.Selector)
		assert.Equal(ct, condition, filter.Expression != "", "the condition: %q", filter.Expression)
	}, time.Minute, 100*time.Millisecond)
}

func webPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name, Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}},
	}
}

// waitRevisions waits for the SidecarSet's ControllerRevisions in the manager's namespace and
// returns their names.
func waitRevisions(ctx context.Context, t *testing.T, c client.Client) []string {
	t.Helper()
	var names []string
	require.Eventually(t, func() bool {
		list := &appsv1.ControllerRevisionList{}
		if c.List(ctx, list, client.InNamespace(namespace)) != nil {
			return false
		}
		names = names[:0]
		for _, r := range list.Items {
			names = append(names, r.Name)
		}
		return len(names) > 0
	}, time.Minute, 200*time.Millisecond, "the controller records the SidecarSet's revision")
	return names
}
