package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/controller/rollout"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/sidecarset/defaults"
	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/mutation"
)

const (
	kruiseNS = "kruise-system"
	appNS    = "games"
	sidecar  = "proxy"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return c
}

func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.NoError(c, f(), what) }, 90*time.Second, 100*time.Millisecond, what)
}

// TestTakeOverFromOpenKruise builds what a cluster running OpenKruise holds, runs the preflight
// until it is clear, lets the manager take over, and checks that the takeover writes no pod, counts
// the status right at once, and that a rollout and a rollback to a revision OpenKruise recorded
// then work as if sidecarops had injected the pods.
func TestTakeOverFromOpenKruise(t *testing.T) {
	c := cluster.Client
	for _, ns := range []string{kruiseNS, appNS} {
		require.NoError(t, c.Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	restoreCRD := kruiseOwnsTheCRDConversion(t)
	removeKruise := installKruise(t)

	// The SidecarSet as OpenKruise's defaulting webhook stored it, its two revisions as OpenKruise's
	// controller recorded them, and pods injected from each: three from the first image, two from
	// the second. Rollouts are paused, as an operator pauses them for a migration.
	ss := &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "mesh"},
		Spec: v1beta1.SidecarSetSpec{
			Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": "game"}},
			NamespaceSelector: v1beta1.NamespaceNamed(appNS),
			Containers:        []v1beta1.SidecarContainer{{Container: corev1.Container{Name: sidecar, Image: "example.com/proxy:1"}}},
			UpdateStrategy:    v1beta1.SidecarSetUpdateStrategy{Paused: true},
		},
	}
	require.NoError(t, defaults.SidecarSetAndHash(ss))
	require.NoError(t, c.Create(ctx(t), ss))
	rev1 := record(t, ss, 1)
	var pods []*corev1.Pod
	for i := range 3 {
		pods = append(pods, createInjected(t, ss, []*appsv1.ControllerRevision{rev1}, i))
	}
	update(t, ss.Name, func(s *v1beta1.SidecarSet) { s.Spec.Containers[0].Image = "example.com/proxy:2" })
	require.NoError(t, c.Get(ctx(t), client.ObjectKey{Name: ss.Name}, ss))
	rev2 := record(t, ss, 2)
	for i := 3; i < 5; i++ {
		pods = append(pods, createInjected(t, ss, []*appsv1.ControllerRevision{rev1, rev2}, i))
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

	// The preflight, as a user runs it: blocked by everything OpenKruise still does.
	ctl, err := devcluster.Build("../..", "sidecarctl", t.TempDir())
	require.NoError(t, err)
	out, code := preflight(t, ctl)
	t.Logf("preflight before:\n%s", out)
	assert.Equal(t, 1, code, "blocked")
	for _, want := range []string{
		"OpenKruise's pod webhook mpod.kb.io",
		"OpenKruise's SidecarSet webhook msidecarset.kb.io",
		"OpenKruise's SidecarSet webhook vsidecarset.kb.io",
		"OpenKruise's controller runs (Deployment kruise-system/kruise-controller-manager, 1 replica(s))",
		"converts versions through Service kruise-system/kruise-webhook-service",
		"1 SidecarSet(s), 2 of their ControllerRevisions in kruise-system, 5 pod(s) injected",
	} {
		assert.Contains(t, out, want)
	}
	removeKruise()
	restoreCRD()
	out, code = preflight(t, ctl)
	t.Logf("preflight after:\n%s", out)
	require.Equal(t, 0, code, "clear once OpenKruise is stopped and the conversion is sidecarops'")
	assert.Contains(t, out, "Clear: nothing blocks the switch.")
	assert.Contains(t, out, "--revision-namespace=kruise-system", "the history's namespace is a warning with its flag")

	// The takeover: the manager with its controller, keeping OpenKruise's history where it is. No
	// pod is written, no revision added, and the first status is right.
	before := resourceVersions(t)
	w := watchPods(t)
	cluster.Manager.SidecarSetWorkers = 0
	cluster.Manager.RevisionNamespace = kruiseNS
	require.NoError(t, cluster.RestartManager(ctx(t)))
	eventually(t, "the status counts OpenKruise's pods", func() error {
		var got v1beta1.SidecarSet
		if err := c.Get(ctx(t), client.ObjectKey{Name: ss.Name}, &got); err != nil {
			return err
		}
		st := got.Status
		if st.ObservedGeneration != got.Generation || st.MatchedPods != 5 || st.UpdatedPods != 2 || st.ReadyPods != 5 || st.UpdatedReadyPods != 2 {
			return fmt.Errorf("status %+v", st)
		}
		if st.LatestRevision != rev2.Name {
			return fmt.Errorf("latestRevision %q, want OpenKruise's %q", st.LatestRevision, rev2.Name)
		}
		return nil
	})
	time.Sleep(2 * time.Second) // the controller's next rounds, had it anything to write
	assert.Empty(t, w.writes(), "pods written during the takeover")
	assert.Equal(t, before, resourceVersions(t), "no pod changed")
	kruiseRevisions := []string{rev1.Name, rev2.Name}
	sort.Strings(kruiseRevisions)
	assert.Equal(t, kruiseRevisions, revisionNames(t), "OpenKruise's revisions reused, none added")

	// A rollout: the three pods on the first image are upgraded in place, once each.
	w.reset()
	update(t, ss.Name, func(s *v1beta1.SidecarSet) { s.Spec.UpdateStrategy.Paused = false })
	waitImages(t, "example.com/proxy:2")
	assert.Equal(t, map[string]int{"game-0": 1, "game-1": 1, "game-2": 1}, w.imageChanges(), "each old pod upgraded once, the others not touched")

	// A rollback to the image of OpenKruise's first revision: the same revision object is reused.
	w.reset()
	update(t, ss.Name, func(s *v1beta1.SidecarSet) { s.Spec.Containers[0].Image = "example.com/proxy:1" })
	waitImages(t, "example.com/proxy:1")
	assert.Equal(t, map[string]int{"game-0": 1, "game-1": 1, "game-2": 1, "game-3": 1, "game-4": 1}, w.imageChanges())
	assert.Equal(t, kruiseRevisions, revisionNames(t), "the rollback renumbers OpenKruise's revision")
	var latest v1beta1.SidecarSet
	require.NoError(t, c.Get(ctx(t), client.ObjectKey{Name: ss.Name}, &latest))
	assert.Equal(t, rev1.Name, latest.Status.LatestRevision)
	w.stop()
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

// installKruise creates OpenKruise's manager Deployment and webhook registrations (they select no
// object and ignore failures, so the API server never waits on a Service nobody serves here) and
// returns what stops OpenKruise as the preflight says.
func installKruise(t *testing.T) func() {
	c := cluster.Client
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: kruiseNS, Name: "kruise-controller-manager"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"control-plane": "controller-manager"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"control-plane": "controller-manager"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "openkruise/kruise-manager:v1.8.0"}}},
			},
		},
	}
	require.NoError(t, c.Create(ctx(t), d))
	svc := &admissionregv1.ServiceReference{Namespace: kruiseNS, Name: "kruise-webhook-service", Path: ptr.To("/")}
	nothing := &metav1.LabelSelector{MatchLabels: map[string]string{"selects": "nothing"}}
	hook := func(group, resource string) (admissionregv1.RuleWithOperations, admissionregv1.WebhookClientConfig) {
		return admissionregv1.RuleWithOperations{
			Operations: []admissionregv1.OperationType{admissionregv1.Create, admissionregv1.Update},
			Rule:       admissionregv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}},
		}, admissionregv1.WebhookClientConfig{Service: svc}
	}
	mutating := &admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "kruise-mutating-webhook-configuration"}}
	for _, h := range [][3]string{{"mpod.kb.io", "", "pods"}, {"msidecarset.kb.io", "apps.kruise.io", "sidecarsets"}} {
		rule, cc := hook(h[1], h[2])
		mutating.Webhooks = append(mutating.Webhooks, admissionregv1.MutatingWebhook{
			Name: h[0], ClientConfig: cc, Rules: []admissionregv1.RuleWithOperations{rule}, ObjectSelector: nothing,
			FailurePolicy: ptr.To(admissionregv1.Ignore), SideEffects: ptr.To(admissionregv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		})
	}
	rule, cc := hook("apps.kruise.io", "sidecarsets")
	validating := &admissionregv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "kruise-validating-webhook-configuration"},
		Webhooks: []admissionregv1.ValidatingWebhook{{
			Name: "vsidecarset.kb.io", ClientConfig: cc, Rules: []admissionregv1.RuleWithOperations{rule}, ObjectSelector: nothing,
			FailurePolicy: ptr.To(admissionregv1.Ignore), SideEffects: ptr.To(admissionregv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		}},
	}
	require.NoError(t, c.Create(ctx(t), mutating))
	require.NoError(t, c.Create(ctx(t), validating))
	return func() {
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Get(ctx(t), client.ObjectKeyFromObject(d), d); err != nil {
				return err
			}
			d.Spec.Replicas = ptr.To(int32(0))
			return c.Update(ctx(t), d)
		}))
		require.NoError(t, c.Delete(ctx(t), mutating))
		require.NoError(t, c.Delete(ctx(t), validating))
	}
}

// record creates the ControllerRevision OpenKruise's controller records for ss's current spec:
// its name, labels, data and owner, in kruise-system.
func record(t *testing.T, ss *v1beta1.SidecarSet, number int64) *appsv1.ControllerRevision {
	cr, err := rollout.NewRevision(ss, kruiseNS, number, 0)
	require.NoError(t, err)
	require.NoError(t, cluster.Client.Create(ctx(t), cr))
	return cr
}

// createInjected creates pod game-i as OpenKruise's webhook injected it: the injection is the same
// code sidecarops serves, which writes OpenKruise's containers and annotations byte for byte.
func createInjected(t *testing.T, ss *v1beta1.SidecarSet, revs []*appsv1.ControllerRevision, i int) *corev1.Pod {
	snap, err := injector.Snapshot(ctx(t), injector.Policies{State: bundles.State{SidecarSets: []*v1beta1.SidecarSet{ss}, ControllerRevisions: revs}})
	require.NoError(t, err)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: appNS, Name: fmt.Sprintf("game-%d", i), Labels: map[string]string{"app": "game"}},
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

func preflight(t *testing.T, bin string) (string, int) {
	t.Helper()
	out, err := exec.Command(bin, "migrate", "check", "--kubeconfig", cluster.Kubeconfig, "--namespace", devcluster.Namespace).CombinedOutput() // #nosec G204 -- the test's own build
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return string(out), code
}

func resourceVersions(t *testing.T) map[string]string {
	var l corev1.PodList
	require.NoError(t, cluster.Client.List(ctx(t), &l, client.InNamespace(appNS)))
	out := map[string]string{}
	for _, p := range l.Items {
		out[p.Name] = p.ResourceVersion
	}
	return out
}

func revisionNames(t *testing.T) []string {
	var l appsv1.ControllerRevisionList
	require.NoError(t, cluster.Client.List(ctx(t), &l, client.InNamespace(kruiseNS), client.HasLabels{v1beta1.SidecarSetNameLabel}))
	var names []string
	for _, cr := range l.Items {
		names = append(names, cr.Name)
	}
	sort.Strings(names)
	return names
}

func waitImages(t *testing.T, img string) {
	t.Helper()
	eventually(t, "every pod runs "+img, func() error {
		var l corev1.PodList
		if err := cluster.Client.List(ctx(t), &l, client.InNamespace(appNS)); err != nil {
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

func watchPods(t *testing.T) *podWatch {
	wc, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: cluster.Client.Scheme()})
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(cctx, &corev1.PodList{}, client.InNamespace(appNS))
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
