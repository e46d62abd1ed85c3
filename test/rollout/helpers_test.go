package rollout

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
)

// timeout bounds every wait: rollouts here take a few kwok delays.
const timeout = 90 * time.Second

const sidecar = "sidecar"

func image(tag string) string { return "example.com/sidecar:" + tag }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// fleet is one test's namespace, SidecarSet (same name) and pods.
type fleet struct {
	t    *testing.T
	name string
	pods []string
}

// newFleet creates namespace and SidecarSet `name` (one cold sidecar on image "1", scoped to the
// namespace, selecting app=name), waits until the webhook injects it, and creates n pods on kwok's
// node, labelled by podLabels(i) in addition, and waits until they all run and the SidecarSet
// counts them ready.
func newFleet(t *testing.T, name string, n int, mutate func(*v1beta1.SidecarSet), podLabels func(i int) map[string]string) *fleet {
	t.Helper()
	ctx := testCtx(t)
	c := cluster.Client
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	ss := scopedSidecarSet(name)
	if mutate != nil {
		mutate(ss)
	}
	require.NoError(t, c.Create(ctx, ss))
	f := &fleet{t: t, name: name}
	probe := f.pod(-1, nil)
	eventually(t, "the webhook injects "+name, func() error {
		p := probe.DeepCopy()
		if err := c.Create(ctx, p, client.DryRunAll); err != nil {
			return err
		}
		if len(p.Spec.Containers) < 2 {
			return fmt.Errorf("not injected yet: %d containers", len(p.Spec.Containers))
		}
		// Pods record the revision they were injected from once the controller has registered it.
		if latest := f.sidecarSet().Status.LatestRevision; latest == "" || !strings.Contains(p.Annotations[v1beta1.SidecarSetHashAnnotation], `"controllerRevision":"`+latest+`"`) {
			return fmt.Errorf("injection does not record the latest revision %q yet", latest)
		}
		return nil
	})
	for i := range n {
		var lbls map[string]string
		if podLabels != nil {
			lbls = podLabels(i)
		}
		p := f.pod(i, lbls)
		require.NoError(t, c.Create(ctx, p))
		f.pods = append(f.pods, p.Name)
	}
	eventually(t, "pods running and counted ready", func() error {
		for _, p := range f.list() {
			if !runningReady(p) {
				return fmt.Errorf("pod %s not running and ready", p.Name)
			}
		}
		got := f.sidecarSet().Status
		if int(got.MatchedPods) != n || int(got.ReadyPods) != n {
			return fmt.Errorf("status matched %d ready %d, want %d", got.MatchedPods, got.ReadyPods, n)
		}
		return nil
	})
	return f
}

// scopedSidecarSet is SidecarSet name with one cold sidecar on image "1", for the pods labelled
// app=name in namespace name.
func scopedSidecarSet(name string) *v1beta1.SidecarSet {
	return &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta1.SidecarSetSpec{
			NamespaceSelector: v1beta1.NamespaceNamed(name),
			Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Containers:        []v1beta1.SidecarContainer{{Container: corev1.Container{Name: sidecar, Image: image("1")}}},
		},
	}
}

func (f *fleet) pod(i int, extra map[string]string) *corev1.Pod { return scopedPod(f.name, i, extra) }

// scopedPod is pod-i of namespace ns, labelled app=ns (and extra), bound to kwok's node.
func scopedPod(ns string, i int, extra map[string]string) *corev1.Pod {
	lbls := map[string]string{"app": ns}
	for k, v := range extra {
		lbls[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("pod-%d", i), Labels: lbls},
		Spec: corev1.PodSpec{
			NodeName:   kw.Node,
			Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}},
		},
	}
}

// list returns the fleet's pods from the API server, sorted by name.
func (f *fleet) list() []*corev1.Pod {
	f.t.Helper()
	var l corev1.PodList
	require.NoError(f.t, cluster.Client.List(testCtx(f.t), &l, client.InNamespace(f.name)))
	out := make([]*corev1.Pod, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, &l.Items[i])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (f *fleet) sidecarSet() *v1beta1.SidecarSet {
	f.t.Helper()
	ss := &v1beta1.SidecarSet{}
	require.NoError(f.t, cluster.Client.Get(testCtx(f.t), client.ObjectKey{Name: f.name}, ss))
	return ss
}

// update changes the SidecarSet's spec, retrying on conflicts with the controller's status writes.
func (f *fleet) update(change func(*v1beta1.SidecarSet)) {
	f.t.Helper()
	require.NoError(f.t, retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		ss := f.sidecarSet()
		change(ss)
		return cluster.Client.Update(testCtx(f.t), ss)
	}))
}

type counts struct{ matched, updated, ready, updatedReady int32 }

// uids records the fleet's pods' UIDs, for upgradedOnce.
func (f *fleet) uids() map[string]types.UID {
	out := map[string]types.UID{}
	for _, p := range f.list() {
		out[p.Name] = p.UID
	}
	return out
}

// waitPartlyMoved waits until some, not all, of the fleet's pods run img in the sidecar: a rollout
// between its batches.
func (f *fleet) waitPartlyMoved(img string) {
	eventually(f.t, "a first batch upgraded", func() error {
		moved := 0
		for _, got := range f.images(sidecar) {
			if got == img {
				moved++
			}
		}
		if moved == 0 || moved == len(f.pods) {
			return fmt.Errorf("%d of %d pods moved", moved, len(f.pods))
		}
		return nil
	})
}

// upgradedOnce checks every pod of the fleet is the one recorded in uids (none lost or replaced),
// runs img in the sidecar, and restarted it exactly once (kwok counts in-place restarts).
func (f *fleet) upgradedOnce(uids map[string]types.UID, img string) {
	pods := f.list()
	require.Len(f.t, pods, len(uids), "no pod lost")
	for _, p := range pods {
		assert.Equal(f.t, uids[p.Name], p.UID, "%s is the same pod", p.Name)
		assert.Equal(f.t, img, containerStatus(p, sidecar).Image)
		assert.Equal(f.t, int32(1), containerStatus(p, sidecar).RestartCount, "%s upgraded exactly once", p.Name)
	}
}

func statusCounts(st v1beta1.SidecarSetStatus) counts {
	return counts{st.MatchedPods, st.UpdatedPods, st.ReadyPods, st.UpdatedReadyPods}
}

// waitStatus waits until the controller has observed the current generation and reports want.
func (f *fleet) waitStatus(want counts) v1beta1.SidecarSetStatus {
	f.t.Helper()
	var st v1beta1.SidecarSetStatus
	eventually(f.t, fmt.Sprintf("SidecarSet %s status %+v", f.name, want), func() error {
		ss := f.sidecarSet()
		st = ss.Status
		if st.ObservedGeneration != ss.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", st.ObservedGeneration, ss.Generation)
		}
		if got := statusCounts(st); got != want {
			return fmt.Errorf("status %+v", got)
		}
		return nil
	})
	return st
}

// waitInjectsCurrentSpec waits until the webhook injects the SidecarSet's current spec: a pod
// created in dry run carries the SidecarSet's current kruise.io/sidecarset-hash.
func (f *fleet) waitInjectsCurrentSpec() {
	f.t.Helper()
	eventually(f.t, "the webhook injects the current spec of "+f.name, func() error {
		want := f.sidecarSet().Annotations[v1beta1.SidecarSetHashAnnotation]
		p := f.pod(-1, nil)
		if err := cluster.Client.Create(testCtx(f.t), p, client.DryRunAll); err != nil {
			return err
		}
		if got := p.Annotations[v1beta1.SidecarSetHashAnnotation]; !strings.Contains(got, `"hash":"`+want+`"`) {
			return fmt.Errorf("injected %s, the SidecarSet's hash is %s", got, want)
		}
		return nil
	})
}

// images returns pod name → the spec image of container name.
func (f *fleet) images(name string) map[string]string {
	out := map[string]string{}
	for _, p := range f.list() {
		out[p.Name] = specImage(p, name)
	}
	return out
}

func specImage(p *corev1.Pod, name string) string {
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}

func containerStatus(p *corev1.Pod, name string) corev1.ContainerStatus {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == name {
			return s
		}
	}
	return corev1.ContainerStatus{}
}

func runningReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// unavailableUpgraded: the pod's container name was moved to img but the kubelet does not run it
// yet (or the pod is not ready) — what maxUnavailable bounds.
func unavailableUpgraded(p *corev1.Pod, name, img string) bool {
	return specImage(p, name) == img && (containerStatus(p, name).Image != img || !runningReady(p))
}

// buildCommand builds ./cmd/<name> of the repository into the test's temporary directory.
func buildCommand(t testing.TB, name string) string {
	t.Helper()
	bin, err := devcluster.Build("../..", name, t.TempDir())
	require.NoError(t, err)
	return bin
}

func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	// Testify's EventuallyWithT reports the last failure, which names what the system still lacks.
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.NoError(c, f(), what) }, timeout, 100*time.Millisecond, what)
}

// podWatch follows the fleet's pods through a watch on the API server and calls observe with the
// full current set after every event, so invariants are checked at every state the API server
// stored, not only at the polls of a test.
type podWatch struct {
	mu       sync.Mutex
	failures []string
	cancel   context.CancelFunc
	done     chan struct{}
}

func (f *fleet) watchPods(observe func(pods map[string]*corev1.Pod) error) *podWatch {
	f.t.Helper()
	wc, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: cluster.Client.Scheme()})
	require.NoError(f.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &corev1.PodList{}, client.InNamespace(f.name))
	require.NoError(f.t, err)
	pw := &podWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(pw.done)
		defer w.Stop()
		pods := map[string]*corev1.Pod{}
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					pw.fail("watch closed early")
					return
				}
				p, isPod := ev.Object.(*corev1.Pod)
				if !isPod {
					pw.fail(fmt.Sprintf("watch event %s: %T", ev.Type, ev.Object))
					continue
				}
				if ev.Type == watch.Deleted {
					delete(pods, p.Name)
				} else {
					pods[p.Name] = p
				}
				if err := observe(pods); err != nil {
					pw.fail(fmt.Sprintf("after %s of %s (resourceVersion %s): %v", ev.Type, p.Name, p.ResourceVersion, err))
				}
			}
		}
	}()
	f.t.Cleanup(pw.stop)
	return pw
}

func (pw *podWatch) fail(msg string) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	pw.failures = append(pw.failures, msg)
}

func (pw *podWatch) stop() {
	pw.cancel()
	<-pw.done
}

// check stops the watch and fails the test with what it saw wrong.
func (pw *podWatch) check(t *testing.T) {
	t.Helper()
	pw.stop()
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if len(pw.failures) > 0 {
		t.Fatalf("%d violation(s) observed through the watch, first ones:\n%s", len(pw.failures), strings.Join(pw.failures[:min(10, len(pw.failures))], "\n"))
	}
}

// events lists the Events about regarding (in every namespace: those about a cluster-scoped
// SidecarSet land in "default").
func events(t *testing.T, regarding client.Object) []eventsv1.Event {
	t.Helper()
	var l eventsv1.EventList
	require.NoError(t, cluster.Client.List(testCtx(t), &l))
	var out []eventsv1.Event
	for _, e := range l.Items {
		if e.Regarding.Name == regarding.GetName() && e.Regarding.Namespace == regarding.GetNamespace() {
			out = append(out, e)
		}
	}
	return out
}

func hasEvent(evs []eventsv1.Event, reason string) (eventsv1.Event, bool) {
	for _, e := range evs {
		if e.Reason == reason {
			return e, true
		}
	}
	return eventsv1.Event{}, false
}

// managerCPU is the CPU time the manager process has used, failing the benchmark if it cannot be read.
func managerCPU(b *testing.B, proc *devcluster.ManagerProcess) time.Duration {
	b.Helper()
	cpu, err := proc.CPU()
	require.NoError(b, err)
	return cpu
}

// roundsPlannedFrom is the in-process controller's sidecarops_controller_rollout_rounds_total for
// planned_from.
func roundsPlannedFrom(t *testing.T, from string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "sidecarops_controller_rollout_rounds_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "planned_from" && l.GetValue() == from {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
