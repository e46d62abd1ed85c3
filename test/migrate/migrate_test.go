package migrate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/controller/rollout"
	"github.com/sidecarops/sidecarops/internal/coexist"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/internal/testing/render"
	"github.com/sidecarops/sidecarops/mutation"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

const (
	kruiseNS = "kruise-system"
	// appNS holds path A's pods, coexistNS path B's.
	appNS     = "games"
	coexistNS = "arcade"
	sidecar   = "proxy"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return c
}

func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	eventuallyWithin(t, 90*time.Second, what, f)
}

func eventuallyWithin(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.NoError(c, f(), what) }, d, 100*time.Millisecond, what)
}

// TestTakeOverFromOpenKruise is docs/migration.md's path A: it builds what a cluster running only
// OpenKruise's SidecarSet holds, runs the preflight until it is clear, lets the manager take over,
// and checks that the takeover writes no pod, counts the status right at once, and that a rollout
// and a rollback to a revision OpenKruise recorded then work as if sidecarops had injected the pods.
func TestTakeOverFromOpenKruise(t *testing.T) {
	c := cluster.Client
	createNamespaces(t, kruiseNS, appNS)
	restoreCRD := kruiseOwnsTheCRDConversion(t)
	kruise := installKruise(t)
	ss, rev1, rev2 := kruiseFleet(t, appNS, "mesh")

	// The preflight, as a user runs it: blocked by everything OpenKruise still does.
	ctl, err := devcluster.Build("../..", "sidecarctl", t.TempDir())
	require.NoError(t, err)
	preflightSays(t, ctl, "before", 1,
		"Path A: nothing of OpenKruise but SidecarSet is in use",
		"OpenKruise's pod webhook mpod.kb.io",
		"OpenKruise's SidecarSet webhook msidecarset.kb.io",
		"OpenKruise's SidecarSet webhook vsidecarset.kb.io",
		"OpenKruise's controller runs (Deployment kruise-system/kruise-controller-manager, 1 replica(s))",
		"converts versions through Service kruise-system/kruise-webhook-service",
		"1 SidecarSet(s), 2 of their ControllerRevisions in kruise-system, 5 pod(s) injected")
	kruise.stop(t)
	restoreCRD()
	// Clear once OpenKruise is stopped and the conversion is sidecarops'; the history's namespace is
	// a warning with its flag.
	preflightSays(t, ctl, "after", 0, "Clear: nothing blocks the switch.", "--revision-namespace=kruise-system")

	// The takeover: the manager with its controller, keeping OpenKruise's history where it is. No
	// pod is written, no revision added, and the first status is right.
	before := resourceVersions(t, appNS)
	w := watchPods(t, appNS)
	runController(t)
	eventually(t, "the status counts OpenKruise's pods", func() error { return statusCounts(ss.Name, 5, 2, rev2.Name) })
	time.Sleep(2 * time.Second) // the controller's next rounds, had it anything to write
	assert.Empty(t, w.writes(), "pods written during the takeover")
	assert.Equal(t, before, resourceVersions(t, appNS), "no pod changed")
	kruiseRevisions := []string{rev1.Name, rev2.Name}
	sort.Strings(kruiseRevisions)
	assert.Equal(t, kruiseRevisions, revisionNames(t, ss.Name), "OpenKruise's revisions reused, none added")

	// A rollout: the three pods on the first image are upgraded in place, once each.
	w.reset()
	update(t, ss.Name, func(s *v1beta1.SidecarSet) { s.Spec.UpdateStrategy.Paused = false })
	waitImages(t, appNS, "example.com/proxy:2")
	assert.Equal(t, map[string]int{"mesh-0": 1, "mesh-1": 1, "mesh-2": 1}, w.imageChanges(), "each old pod upgraded once, the others not touched")

	// A rollback to the image of OpenKruise's first revision: the same revision object is reused.
	w.reset()
	update(t, ss.Name, func(s *v1beta1.SidecarSet) { s.Spec.Containers[0].Image = "example.com/proxy:1" })
	waitImages(t, appNS, "example.com/proxy:1")
	assert.Equal(t, map[string]int{"mesh-0": 1, "mesh-1": 1, "mesh-2": 1, "mesh-3": 1, "mesh-4": 1}, w.imageChanges())
	assert.Equal(t, kruiseRevisions, revisionNames(t, ss.Name), "the rollback renumbers OpenKruise's revision")
	var latest v1beta1.SidecarSet
	require.NoError(t, c.Get(ctx(t), client.ObjectKey{Name: ss.Name}, &latest))
	assert.Equal(t, rev1.Name, latest.Status.LatestRevision)
	w.stop()
}

// Path B on every supported Kubernetes version (make test-k8s-versions): OpenKruise keeps running,
// its pod webhook included, the SidecarSet CRD and its conversion stay its own, and sidecarops takes
// over SidecarSets with the fence and --openkruise-kept. What OpenKruise's pod webhook gives a pod
// before the switch it gives after: the launch-priority barrier, a PodUnavailableBudget's refusal.
// A kube-system pod a SidecarSet selects is answered by sidecarops' pod webhook.
func TestCoexistWithOpenKruise(t *testing.T) {
	c := cluster.Client
	createNamespaces(t, kruiseNS, coexistNS)
	runNoController(t) // before the switch, sidecarops does nothing
	installCloneSet(t)
	t.Cleanup(kruiseOwnsTheCRDConversion(t)) // and keeps it through path B
	installKruiseManager(t)
	kruisePodWebhooks(t)
	ss, _, rev2 := kruiseFleet(t, coexistNS, "arcade")

	// Before the switch, OpenKruise's pod webhook injects and orders container start.
	before := createOrdered(t, "arcade")
	assert.Equal(t, []string{sidecar, "game"}, barriers(before), "OpenKruise's launch priority")
	protected := createProtected(t)
	assert.ErrorContains(t, c.Delete(ctx(t), protected), "PodUnavailableBudget protected allows no unavailable pod")

	ctl, err := devcluster.Build("../..", "sidecarctl", t.TempDir())
	require.NoError(t, err)
	out := preflightSays(t, ctl, "before", 1, "Path B: OpenKruise's other workloads are in use", "  CloneSet.apps.kruise.io: 1\n",
		"the fence is not installed")
	assert.NotContains(t, out, "PodWebhook=false", "path B keeps OpenKruise's pod webhook")
	assert.NotContains(t, out, "MutatingAdmissionPolicy", "path B needs no Kubernetes 1.36")
	doc, err := os.ReadFile("../../docs/cli.md")
	require.NoError(t, err)
	assert.Contains(t, string(doc), out[strings.Index(out, "Path B:"):]+"```", "docs/cli.md shows this report")

	// Path B: the fence, and sidecarops' manager with --openkruise-kept and its pod webhook.
	installFence(t)
	grantKruiseRights(t, kruiseManager)
	asKruise := impersonate(t, kruiseManager, kruiseNS)
	eventually(t, "the fence is in force", func() error {
		return refused(sidecarSetStatusWrite(ctx(t), asKruise, ss.Name, client.DryRunAll))
	})
	registerPodWebhook(t)
	cluster.Manager.OpenKruiseKept = true
	t.Cleanup(func() {
		cluster.Manager.OpenKruiseKept = false
		require.NoError(t, cluster.RestartManager(context.Background()))
	})
	require.NoError(t, cluster.RestartManager(ctx(t)))
	runController(t)

	// The manager keeps OpenKruise's SidecarSet webhooks out of its configurations, template
	// included, so that its restarts do not bring them back; its pod webhooks stay.
	eventually(t, "OpenKruise's SidecarSet webhooks removed", func() error {
		m := &admissionregv1.MutatingWebhookConfiguration{}
		v := &admissionregv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx(t), client.ObjectKey{Name: coexist.MutatingConfiguration}, m); err != nil {
			return err
		}
		if err := c.Get(ctx(t), client.ObjectKey{Name: coexist.ValidatingConfiguration}, v); err != nil {
			return err
		}
		got := fmt.Sprint(webhookNames(m.Webhooks, func(w admissionregv1.MutatingWebhook) string { return w.Name }),
			webhookNames(v.Webhooks, func(w admissionregv1.ValidatingWebhook) string { return w.Name }),
			m.Annotations[coexist.TemplateAnnotation] != "" && !strings.Contains(m.Annotations[coexist.TemplateAnnotation], "msidecarset"),
			v.Annotations[coexist.TemplateAnnotation] != "" && !strings.Contains(v.Annotations[coexist.TemplateAnnotation], "vsidecarset"))
		if want := "[mpod.kb.io] [vpod.kb.io] true true"; got != want {
			return fmt.Errorf("webhooks and templates %s, want %s", got, want)
		}
		return nil
	})
	// OpenKruise's webhook controller rewrites the CRD's conversion at each certificate sync: the
	// fence lets it, as the conversion is OpenKruise's on path B.
	fenceKeepsTheConversion(t, asKruise)

	preflightSays(t, ctl, "after", 0, "Path B", "  CloneSet.apps.kruise.io: 1\n",
		"the fence: ValidatingAdmissionPolicyBinding sidecarops-openkruise-fence", "Clear: nothing blocks the switch.")

	// sidecarops' controller takes over the SidecarSet; OpenKruise's manager keeps running.
	eventually(t, "the status counts OpenKruise's pods", func() error { return statusCounts(ss.Name, 6, 3, rev2.Name) })

	// The rollout of the paused revision, while OpenKruise's SidecarSet controller makes the same
	// writes as it would: the SidecarSet's status, and the sidecar upgrade of each old pod.
	w := watchPods(t, coexistNS)
	stop := openKruiseSidecarSetController(t, asKruise, ss.Name, coexistNS, []string{"arcade-0", "arcade-1", "arcade-2"})
	update(t, ss.Name, func(s *v1beta1.SidecarSet) { s.Spec.UpdateStrategy.Paused = false })
	waitImages(t, coexistNS, "example.com/proxy:2")
	statuses, upgrades := stop()
	assert.Positive(t, statuses, "OpenKruise's status writes refused during the rollout")
	assert.Positive(t, upgrades, "OpenKruise's sidecar upgrades refused during the rollout")
	eventually(t, "the status counts the rollout", func() error { return statusCounts(ss.Name, 6, 6, rev2.Name) })
	time.Sleep(time.Second) // the controller's next rounds, had it anything more to write
	old := map[string]int{"arcade-0": 1, "arcade-1": 1, "arcade-2": 1}
	assert.Equal(t, old, w.imageChanges(), "each old pod upgraded once, the others not touched")
	assert.Equal(t, old, count(w.writes()), "each old pod written once")
	w.stop()

	// OpenKruise's other controllers keep working: a CloneSet's in-place update of a pod's app
	// container, and its webhook controller's rewrite of the CRD's conversion at its next sync.
	key := client.ObjectKey{Namespace: coexistNS, Name: "arcade-4"}
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var p corev1.Pod
		if err := asKruise.Get(ctx(t), key, &p); err != nil {
			return err
		}
		p.Spec.Containers[1].Image = "example.com/game:2"
		p.Annotations["apps.kruise.io/inplace-update-state"] = `{"revision":"game-2","updateTimestamp":"2026-01-02T00:00:00Z"}`
		return asKruise.Update(ctx(t), &p)
	}), "OpenKruise's CloneSet in-place update")
	var updated corev1.Pod
	require.NoError(t, c.Get(ctx(t), key, &updated))
	assert.Equal(t, []string{"example.com/proxy:2", "example.com/game:2"}, []string{updated.Spec.Containers[0].Image, updated.Spec.Containers[1].Image})
	fenceKeepsTheConversion(t, asKruise)

	// After the switch a new pod gets what it got before from OpenKruise's pod webhook, and its
	// sidecar from sidecarops' (which answered it).
	decisions := podDecisions(t)
	after := createOrdered(t, "arcade")
	assert.Equal(t, decisions+1, podDecisions(t), "sidecarops' pod webhook answered the pod")
	assert.Equal(t, []string{sidecar, "game"}, barriers(after), "OpenKruise's launch priority, kept")
	assert.Equal(t, "example.com/proxy:2", after.Spec.Containers[0].Image)
	assert.ErrorContains(t, c.Delete(ctx(t), protected), "PodUnavailableBudget protected allows no unavailable pod", "OpenKruise's PodUnavailableBudget, kept")

	// A kube-system pod a SidecarSet selects reaches sidecarops' pod webhook, as OpenKruise's.
	ingress := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "ingress-log"}, Spec: v1beta1.SidecarSetSpec{
		Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ingress"}},
		NamespaceSelector: v1beta1.NamespaceNamed(metav1.NamespaceSystem),
		Containers:        []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "log", Image: "example.com/log:1"}}},
	}}
	require.NoError(t, defaults.SidecarSetAndHash(ingress))
	require.NoError(t, c.Create(ctx(t), ingress))
	t.Cleanup(func() { _ = c.Delete(context.Background(), ingress) })
	decisions = podDecisions(t)
	sys := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, GenerateName: "ingress-", Labels: map[string]string{"app": "ingress"}},
		Spec: corev1.PodSpec{NodeName: kw.Node, Containers: []corev1.Container{{Name: "ingress", Image: "example.com/ingress:1"}}}}
	eventually(t, "the kube-system pod is created", func() error { return c.Create(ctx(t), sys.DeepCopy()) })
	assert.Equal(t, decisions+1, podDecisions(t), "sidecarops' pod webhook answered the kube-system pod")
	var sysPods corev1.PodList
	require.NoError(t, c.List(ctx(t), &sysPods, client.InNamespace(metav1.NamespaceSystem), client.MatchingLabels{"app": "ingress"}))
	require.Len(t, sysPods.Items, 1)
	assert.Equal(t, []string{"log", "ingress"}, containerNames(&sysPods.Items[0]))
	t.Cleanup(func() { _ = c.Delete(context.Background(), &sysPods.Items[0]) })

	// OpenKruise's own workloads are still there, and the preflight still clear.
	preflightSays(t, ctl, "at the end", 0, "  CloneSet.apps.kruise.io: 1\n", "Clear: nothing blocks the switch.")
}

// createOrdered creates a pod of the SidecarSet app selects, asking OpenKruise for ordered container
// start, and returns it as stored.
func createOrdered(t *testing.T, app string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: coexistNS, GenerateName: app + "-ordered-", Labels: map[string]string{"app": app},
		Annotations: map[string]string{"apps.kruise.io/container-launch-priority": "Ordered"}},
		Spec: corev1.PodSpec{NodeName: kw.Node, Containers: []corev1.Container{{Name: "game", Image: "example.com/game:1"}}}}
	require.NoError(t, cluster.Client.Create(ctx(t), p))
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), p) })
	return p
}

// createProtected creates a pod the stand-in's PodUnavailableBudget protects.
func createProtected(t *testing.T) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: coexistNS, Name: "protected", Labels: map[string]string{protectedLabel: "true"}},
		Spec: corev1.PodSpec{NodeName: kw.Node, Containers: []corev1.Container{{Name: "db", Image: "example.com/db:1"}}}}
	require.NoError(t, cluster.Client.Create(ctx(t), p))
	t.Cleanup(func() {
		_ = cluster.Client.Delete(context.Background(), &admissionregv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: coexist.ValidatingConfiguration}})
		_ = cluster.Client.Delete(context.Background(), p)
	})
	return p
}

// barriers names the containers of p carrying launch priority's barrier env.
func barriers(p *corev1.Pod) []string {
	var names []string
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == "KRUISE_CONTAINER_BARRIER" && e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil &&
				e.ValueFrom.ConfigMapKeyRef.Name == p.Name+"-barrier" {
				names = append(names, c.Name)
			}
		}
	}
	return names
}

func containerNames(p *corev1.Pod) []string {
	var names []string
	for _, c := range p.Spec.Containers {
		names = append(names, c.Name)
	}
	return names
}

func webhookNames[W any](hooks []W, name func(W) string) []string {
	var names []string
	for _, w := range hooks {
		names = append(names, name(w))
	}
	return names
}

// podDecisions is how many pods the in-process manager's pod webhook has answered.
func podDecisions(t *testing.T) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	require.NoError(t, err)
	var n float64
	for _, f := range families {
		if f.GetName() == "sidecarops_webhook_pod_decisions_total" {
			for _, m := range f.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// registerPodWebhook registers sidecarops' pod webhook as config/default does, calling the
// in-process manager, for the rest of the test.
func registerPodWebhook(t *testing.T) {
	objs, err := render.Kustomize("../../config/default")
	require.NoError(t, err)
	m := &admissionregv1.MutatingWebhookConfiguration{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(objs["MutatingWebhookConfiguration/sidecarops"].Object, m))
	wio := cluster.Env.WebhookInstallOptions
	m.Webhooks = m.Webhooks[:1] // the pod webhook; the SidecarSet ones need no API server here
	m.Webhooks[0].ClientConfig = admissionregv1.WebhookClientConfig{
		URL:      ptr.To(fmt.Sprintf("https://%s/mutate-pod", net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort)))),
		CABundle: wio.LocalServingCAData,
	}
	require.NoError(t, cluster.Client.Create(ctx(t), m))
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), m) })
}

// openKruiseSidecarSetController makes, as OpenKruise's manager, the writes of its SidecarSet
// controller over and over until the returned function is called: the status of SidecarSet name,
// and the upgrade of pods in ns to the SidecarSet's image with its hash annotation. It fails the
// test if any write is admitted or refused by anything but the fence, and returns how many of each
// the fence refused. A write that meets a newer resourceVersion (sidecarops' controller wrote
// first), and a pod already upgraded, are counted neither way.
func openKruiseSidecarSetController(t *testing.T, kruise client.Client, name, ns string, pods []string) func() (statuses, upgrades int) {
	cctx, cancel := context.WithCancel(ctx(t))
	done := make(chan struct{})
	var statuses, upgrades int
	var errs []error
	judge := func(what string, n *int, err error) {
		switch {
		case cctx.Err() != nil: // stopped in flight
		case apierrors.IsConflict(err), errors.Is(err, errUpgraded):
		case refused(err) == nil:
			*n++
		default:
			errs = append(errs, fmt.Errorf("%s: %w", what, cmp.Or(err, errors.New("admitted"))))
		}
	}
	go func() {
		defer close(done)
		for i := 0; cctx.Err() == nil; i++ {
			judge("status", &statuses, sidecarSetStatusWrite(cctx, kruise, name))
			judge("upgrade", &upgrades, sidecarUpgrade(cctx, kruise, name, client.ObjectKey{Namespace: ns, Name: pods[i%len(pods)]}))
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() (int, int) {
		cancel()
		<-done
		assert.NoError(t, errors.Join(errs...), "OpenKruise's SidecarSet controller's writes")
		return statuses, upgrades
	}
}

// sidecarSetStatusWrite writes the status of SidecarSet name as OpenKruise's controller computes
// it: observed generation and counts.
func sidecarSetStatusWrite(ctx context.Context, c client.Client, name string, opts ...client.SubResourceUpdateOption) error {
	var ss v1beta1.SidecarSet
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &ss); err != nil {
		return err
	}
	ss.Status.ObservedGeneration = ss.Generation
	ss.Status.MatchedPods = 5
	ss.Status.UpdatedPods = 0
	return c.Status().Update(ctx, &ss, opts...)
}

// errUpgraded says a pod runs the SidecarSet's image already.
var errUpgraded = errors.New("already upgraded")

// sidecarUpgrade upgrades the sidecar of pod key to SidecarSet name's image as OpenKruise's
// controller does: the image and the pod's hash annotation in one update. A pod already on that
// image is left alone (errUpgraded), as that controller leaves it.
func sidecarUpgrade(ctx context.Context, c client.Client, name string, key client.ObjectKey) error {
	var ss v1beta1.SidecarSet
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &ss); err != nil {
		return err
	}
	var p corev1.Pod
	if err := c.Get(ctx, key, &p); err != nil {
		return err
	}
	img := ss.Spec.Containers[0].Image
	if image(&p) == img {
		return errUpgraded
	}
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == sidecar {
			p.Spec.Containers[i].Image = img
		}
	}
	hashes := map[string]map[string]any{}
	if err := json.Unmarshal([]byte(p.Annotations[v1beta1.SidecarSetHashAnnotation]), &hashes); err != nil || hashes[name] == nil {
		return fmt.Errorf("pod %s: no hash of SidecarSet %s: %w", key.Name, name, err)
	}
	hashes[name]["hash"] = ss.Annotations[v1beta1.SidecarSetHashAnnotation]
	hashes[name]["controllerRevision"] = ss.Status.LatestRevision
	raw, err := json.Marshal(hashes)
	if err != nil {
		return err
	}
	p.Annotations[v1beta1.SidecarSetHashAnnotation] = string(raw)
	return c.Update(ctx, &p)
}

// refused says nil when err is the fence's refusal.
func refused(err error) error {
	if err != nil && (apierrors.IsInvalid(err) || apierrors.IsForbidden(err)) && strings.Contains(err.Error(), fenceMessage) {
		return nil
	}
	return fmt.Errorf("not refused by the fence: %w", err)
}

// kruiseFleet creates SidecarSet name as OpenKruise's defaulting webhook stored it, selecting the
// pods labelled app=name in ns, its two revisions as OpenKruise's controller recorded them, and
// pods name-0 to name-4 injected from each: three from the first image, two from the second.
// Rollouts are paused, as an operator pauses them for a migration.
func kruiseFleet(t *testing.T, ns, name string) (ss *v1beta1.SidecarSet, rev1, rev2 *appsv1.ControllerRevision) {
	c := cluster.Client
	ss = &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta1.SidecarSetSpec{
			Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			NamespaceSelector: v1beta1.NamespaceNamed(ns),
			Containers:        []v1beta1.SidecarContainer{{Container: corev1.Container{Name: sidecar, Image: "example.com/proxy:1"}}},
			UpdateStrategy:    v1beta1.SidecarSetUpdateStrategy{Paused: true},
		},
	}
	require.NoError(t, defaults.SidecarSetAndHash(ss))
	require.NoError(t, c.Create(ctx(t), ss))
	rev1 = record(t, ss, 1)
	var pods []*corev1.Pod
	for i := range 3 {
		pods = append(pods, createInjected(t, ns, ss, []*appsv1.ControllerRevision{rev1}, i))
	}
	update(t, ss.Name, func(s *v1beta1.SidecarSet) { s.Spec.Containers[0].Image = "example.com/proxy:2" })
	require.NoError(t, c.Get(ctx(t), client.ObjectKey{Name: ss.Name}, ss))
	rev2 = record(t, ss, 2)
	for i := 3; i < 5; i++ {
		pods = append(pods, createInjected(t, ns, ss, []*appsv1.ControllerRevision{rev1, rev2}, i))
	}
	eventually(t, "kwok runs the pods", func() error {
		for _, p := range pods {
			var got corev1.Pod
			if err := c.Get(ctx(t), client.ObjectKeyFromObject(p), &got); err != nil {
				return err
			}
			if !rollout.IsPodReady(&got, ss) {
				return fmt.Errorf("pod %s not ready", p.Name)
			}
		}
		return nil
	})
	return ss, rev1, rev2
}

// statusCounts says whether SidecarSet name's status is observed and counts matched and updated
// pods, all ready, with latest revision.
func statusCounts(name string, matched, updated int32, latest string) error {
	var got v1beta1.SidecarSet
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Name: name}, &got); err != nil {
		return err
	}
	st := got.Status
	if st.ObservedGeneration != got.Generation || st.MatchedPods != matched || st.UpdatedPods != updated || st.ReadyPods != matched || st.UpdatedReadyPods != updated {
		return fmt.Errorf("status %+v", st)
	}
	if st.LatestRevision != latest {
		return fmt.Errorf("latestRevision %q, want %q", st.LatestRevision, latest)
	}
	return nil
}

// runController runs the manager with its controller, keeping OpenKruise's history where it is, as
// config/samples/kruise-takeover and kruise-coexist install it.
func runController(t *testing.T) {
	restartManager(t, 0, kruiseNS)
}

// runNoController runs the manager without its controller: as if sidecarops were not installed yet
// (the API server calls no webhook of it).
func runNoController(t *testing.T) {
	restartManager(t, -1, "")
}

func restartManager(t *testing.T, workers int, revisionNamespace string) {
	if cluster.Manager.SidecarSetWorkers == workers && cluster.Manager.RevisionNamespace == revisionNamespace {
		return
	}
	cluster.Manager.SidecarSetWorkers = workers
	cluster.Manager.RevisionNamespace = revisionNamespace
	require.NoError(t, cluster.RestartManager(ctx(t)))
}

func createNamespaces(t *testing.T, names ...string) {
	for _, ns := range names {
		err := cluster.Client.Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
}

// installCloneSet creates OpenKruise's CloneSet CRD (testdata/cloneset-crd.yaml) and one CloneSet
// in coexistNS, and deletes the CRD, and so the CloneSet, when the test ends.
func installCloneSet(t *testing.T) {
	raw, err := os.ReadFile("testdata/cloneset-crd.yaml")
	require.NoError(t, err)
	crd := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal(raw, &crd.Object))
	require.NoError(t, cluster.Client.Create(ctx(t), crd))
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), crd) })
	cs := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"replicas": int64(2),
		"selector": map[string]any{"matchLabels": map[string]any{"app": "lobby"}},
		"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"app": "lobby"}},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "lobby", "image": "example.com/lobby:1"}}},
		},
	}}}
	cs.SetAPIVersion("apps.kruise.io/v1alpha1")
	cs.SetKind("CloneSet")
	cs.SetNamespace(coexistNS)
	cs.SetName("lobby")
	// The kind is served once the CRD is established.
	eventually(t, "the CloneSet kind is served", func() error { return cluster.Client.Create(ctx(t), cs.DeepCopy()) })
}

// kruiseOwnsTheCRDConversion points the CRD's conversion at OpenKruise's Service, as its chart
// installs it, and returns what puts sidecarops' back.
func kruiseOwnsTheCRDConversion(t *testing.T) func() {
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	require.NoError(t, cluster.Client.Get(ctx(t), client.ObjectKey{Name: "sidecarsets.apps.kruise.io"}, crd))
	ours, _, _ := unstructured.NestedMap(crd.Object, "spec", "conversion")
	kruise := map[string]any{"strategy": "Webhook", "webhook": map[string]any{
		"conversionReviewVersions": []any{"v1", "v1beta1"},
		"clientConfig":             map[string]any{"service": map[string]any{"name": "kruise-webhook-service", "namespace": kruiseNS, "path": "/convert"}},
	}}
	set := func(conv map[string]any) {
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := cluster.Client.Get(ctx(t), client.ObjectKeyFromObject(crd), crd); err != nil {
				return err
			}
			require.NoError(t, unstructured.SetNestedMap(crd.Object, conv, "spec", "conversion"))
			return cluster.Client.Update(ctx(t), crd)
		}))
	}
	set(kruise)
	return func() { set(ours) }
}

// kruiseInstall is OpenKruise's manager Deployment and webhook registrations.
type kruiseInstall struct {
	deployment *appsv1.Deployment
	mutating   *admissionregv1.MutatingWebhookConfiguration
	validating *admissionregv1.ValidatingWebhookConfiguration
}

// installKruiseManager creates (or restores) OpenKruise's manager Deployment, as its chart installs
// it; nothing runs it here.
func installKruiseManager(t *testing.T) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: kruiseNS, Name: "kruise-controller-manager"}}
	_, err := controllerutil.CreateOrUpdate(ctx(t), cluster.Client, d, func() error {
		d.Spec = appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"control-plane": "controller-manager"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"control-plane": "controller-manager"}},
				Spec: corev1.PodSpec{
					ServiceAccountName: "kruise-manager",
					Containers:         []corev1.Container{{Name: "manager", Image: "openkruise/kruise-manager:v1.8.0"}},
				},
			},
		}
		return nil
	})
	require.NoError(t, err)
	return d
}

// installKruise creates (or, after another test, restores) OpenKruise's manager Deployment and
// webhook registrations. They select no object and ignore failures, so the API server never waits
// on a Service nobody serves here.
func installKruise(t *testing.T) *kruiseInstall {
	c := cluster.Client
	k := &kruiseInstall{deployment: installKruiseManager(t)}
	svc := &admissionregv1.ServiceReference{Namespace: kruiseNS, Name: "kruise-webhook-service", Path: ptr.To("/")}
	nothing := &metav1.LabelSelector{MatchLabels: map[string]string{"selects": "nothing"}}
	hook := func(group, resource string) (admissionregv1.RuleWithOperations, admissionregv1.WebhookClientConfig) {
		return admissionregv1.RuleWithOperations{
			Operations: []admissionregv1.OperationType{admissionregv1.Create, admissionregv1.Update},
			Rule:       admissionregv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}},
		}, admissionregv1.WebhookClientConfig{Service: svc}
	}
	k.mutating = &admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "kruise-mutating-webhook-configuration"}}
	for _, h := range [][3]string{{"mpod.kb.io", "", "pods"}, {"msidecarset.kb.io", "apps.kruise.io", "sidecarsets"}} {
		rule, cc := hook(h[1], h[2])
		k.mutating.Webhooks = append(k.mutating.Webhooks, admissionregv1.MutatingWebhook{
			Name: h[0], ClientConfig: cc, Rules: []admissionregv1.RuleWithOperations{rule}, ObjectSelector: nothing,
			FailurePolicy: ptr.To(admissionregv1.Ignore), SideEffects: ptr.To(admissionregv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		})
	}
	rule, cc := hook("apps.kruise.io", "sidecarsets")
	k.validating = &admissionregv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "kruise-validating-webhook-configuration"},
		Webhooks: []admissionregv1.ValidatingWebhook{{
			Name: "vsidecarset.kb.io", ClientConfig: cc, Rules: []admissionregv1.RuleWithOperations{rule}, ObjectSelector: nothing,
			FailurePolicy: ptr.To(admissionregv1.Ignore), SideEffects: ptr.To(admissionregv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		}},
	}
	require.NoError(t, c.Create(ctx(t), k.mutating))
	require.NoError(t, c.Create(ctx(t), k.validating))
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), k.mutating)
		_ = c.Delete(context.Background(), k.validating)
	})
	return k
}

// stop stops OpenKruise as path A does: its manager scaled to 0, its registrations deleted.
func (k *kruiseInstall) stop(t *testing.T) {
	c := cluster.Client
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx(t), client.ObjectKeyFromObject(k.deployment), k.deployment); err != nil {
			return err
		}
		k.deployment.Spec.Replicas = ptr.To(int32(0))
		return c.Update(ctx(t), k.deployment)
	}))
	require.NoError(t, c.Delete(ctx(t), k.mutating))
	require.NoError(t, c.Delete(ctx(t), k.validating))
}

// record creates the ControllerRevision OpenKruise's controller records for ss's current spec:
// its name, labels, data and owner, in kruise-system.
func record(t *testing.T, ss *v1beta1.SidecarSet, number int64) *appsv1.ControllerRevision {
	cr, err := rollout.NewRevision(ss, kruiseNS, number, 0)
	require.NoError(t, err)
	require.NoError(t, cluster.Client.Create(ctx(t), cr))
	return cr
}

// createInjected creates pod <ss>-i in ns, labelled as ss selects, as OpenKruise's webhook injected
// it: the injection is the same code sidecarops serves, which writes OpenKruise's containers and
// annotations byte for byte.
func createInjected(t *testing.T, ns string, ss *v1beta1.SidecarSet, revs []*appsv1.ControllerRevision, i int) *corev1.Pod {
	snap, err := injector.Snapshot(ctx(t), injector.Policies{State: bundles.State{SidecarSets: []*v1beta1.SidecarSet{ss}, ControllerRevisions: revs}})
	require.NoError(t, err)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", ss.Name, i), Labels: ss.Spec.Selector.MatchLabels},
		Spec:       corev1.PodSpec{NodeName: kw.Node, Containers: []corev1.Container{{Name: "game", Image: "example.com/game:1"}}},
	}
	res, err := injector.Pod(ctx(t), snap, &mutation.Injector{Now: time.Now, Rand: rand.Float64}, injector.PodRequest{Pod: p})
	require.NoError(t, err)
	require.Equal(t, injector.Injected, res.Outcome)
	injected := res.Pod.DeepCopy()
	require.NoError(t, cluster.Client.Create(ctx(t), injected))
	return injected
}

func update(t *testing.T, name string, change func(*v1beta1.SidecarSet)) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var ss v1beta1.SidecarSet
		if err := cluster.Client.Get(ctx(t), client.ObjectKey{Name: name}, &ss); err != nil {
			return err
		}
		change(&ss)
		// Stored as OpenKruise's (and sidecarops') defaulting webhook stores it: the demo cluster
		// registers no webhook before the takeover.
		if err := defaults.SidecarSetAndHash(&ss); err != nil {
			return err
		}
		return cluster.Client.Update(ctx(t), &ss)
	}))
}

// preflightSays runs the preflight, logs what it says, and checks its exit status and that it says
// each of wants.
func preflightSays(t *testing.T, bin, when string, code int, wants ...string) string {
	t.Helper()
	out, got := migrateCheck(t, bin, cluster.Kubeconfig)
	t.Logf("preflight %s:\n%s", when, out)
	require.Equal(t, code, got, "exit status")
	for _, want := range wants {
		assert.Contains(t, out, want)
	}
	return out
}

func resourceVersions(t *testing.T, ns string) map[string]string {
	var l corev1.PodList
	require.NoError(t, cluster.Client.List(ctx(t), &l, client.InNamespace(ns)))
	out := map[string]string{}
	for _, p := range l.Items {
		out[p.Name] = p.ResourceVersion
	}
	return out
}

// revisionNames are the names of SidecarSet name's revisions, sorted.
func revisionNames(t *testing.T, name string) []string {
	var l appsv1.ControllerRevisionList
	require.NoError(t, cluster.Client.List(ctx(t), &l, client.InNamespace(kruiseNS), client.MatchingLabels{v1beta1.SidecarSetNameLabel: name}))
	var names []string
	for _, cr := range l.Items {
		names = append(names, cr.Name)
	}
	sort.Strings(names)
	return names
}

func waitImages(t *testing.T, ns, img string) {
	t.Helper()
	eventually(t, "every pod runs "+img, func() error {
		var l corev1.PodList
		if err := cluster.Client.List(ctx(t), &l, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, p := range l.Items {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Name == sidecar && (cs.Image != img || !cs.Ready) {
					return fmt.Errorf("pod %s runs %s (ready %t)", p.Name, cs.Image, cs.Ready)
				}
			}
		}
		return nil
	})
}

// podWatch records, from a watch on the API server, every write to the pods: the ones whose
// metadata or spec changed (what the manager writes; kwok writes status only), and the changes of
// the sidecar's image per pod.
type podWatch struct {
	mu      sync.Mutex
	last    map[types.UID]*corev1.Pod
	written []string
	images  map[string]int
	cancel  context.CancelFunc
	done    chan struct{}
}

func watchPods(t *testing.T, ns string) *podWatch {
	wc, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: cluster.Client.Scheme()})
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(cctx, &corev1.PodList{}, client.InNamespace(ns))
	require.NoError(t, err)
	pw := &podWatch{last: map[types.UID]*corev1.Pod{}, images: map[string]int{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(pw.done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			pw.mu.Lock()
			prev := pw.last[p.UID]
			pw.last[p.UID] = p
			if ev.Type == watch.Modified && prev != nil {
				if !jsonEqual(prev.Annotations, p.Annotations) || !jsonEqual(prev.Labels, p.Labels) || !jsonEqual(prev.Spec, p.Spec) {
					pw.written = append(pw.written, p.Name)
				}
				if image(prev) != image(p) {
					pw.images[p.Name]++
				}
			}
			pw.mu.Unlock()
		}
	}()
	t.Cleanup(pw.stop)
	return pw
}

// count counts the occurrences of each name.
func count(names []string) map[string]int {
	out := map[string]int{}
	for _, n := range names {
		out[n]++
	}
	return out
}

func (pw *podWatch) writes() []string {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	return append([]string(nil), pw.written...)
}

func (pw *podWatch) imageChanges() map[string]int {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	out := map[string]int{}
	for k, v := range pw.images {
		out[k] = v
	}
	return out
}

func (pw *podWatch) reset() {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	pw.written, pw.images = nil, map[string]int{}
}

func (pw *podWatch) stop() {
	pw.cancel()
	<-pw.done
}

func image(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		if c.Name == sidecar {
			return c.Image
		}
	}
	return ""
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
