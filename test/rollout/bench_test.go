package rollout

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
)

var benchRuns int

// benchWriters is how many writes the floor's client has in flight: the controller's own bound
// (controller.Reconciler.PodWriters' default), so the floor is the same client shape.
const benchWriters = 16

// BenchmarkRollout measures a rollout of a sidecar image to 1,000 and to 10,000 kwok pods with
// maxUnavailable 100% beside the floor: the same API server, the same pods, one client patching
// an image of each pod (the app container's) with as many writes in flight as the controller
// allows itself. Both are timed to two points: every pod's spec written, and every pod's status
// reporting the new image (kwok, with no restart delay, plays the kubelet). Each size has its own
// namespace and SidecarSet, deleted with their pods at the end of its run. Run it alone, one size
// at a time (pods=1000 is the figure issue 4 measured as BenchmarkRollout1000):
//
//	go test ./test/rollout/ -run '^$' -bench 'Rollout/pods=1000$' -benchtime 1x -count 3
//	go test ./test/rollout/ -run '^$' -bench 'Rollout/pods=10000$' -benchtime 1x -count 2 -timeout 60m
func BenchmarkRollout(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) { benchRollout(b, n) })
	}
}

func benchRollout(b *testing.B, pods int) {
	ctx := context.Background()
	benchRuns++ // -count runs the benchmark again in the same cluster
	name := fmt.Sprintf("bench-%d-%d", pods, benchRuns)
	c := cluster.Client
	require.NoError(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	ss := scopedSidecarSet(name)
	ss.Spec.UpdateStrategy.MaxUnavailable = ptrIntStr(intstr.FromString("100%"))
	require.NoError(b, c.Create(ctx, ss))
	b.Cleanup(func() { deleteFleet(b, name) })
	waitInjected(b, name)
	parallel(b, pods, func(i int) error { return c.Create(ctx, scopedPod(name, i, nil)) })
	waitB(b, "pods ready and matched", func() error {
		st := getSS(b, name).Status
		if int(st.MatchedPods) != pods || int(st.ReadyPods) != pods {
			return fmt.Errorf("matched %d ready %d", st.MatchedPods, st.ReadyPods)
		}
		return nil
	})

	// The sidecar goes before the app container (podInjectPolicy BeforeAppContainer).
	var first corev1.Pod
	require.NoError(b, c.Get(ctx, client.ObjectKey{Namespace: name, Name: "pod-0"}, &first))
	appIndex := -1
	for i, ctr := range first.Spec.Containers {
		if ctr.Name == "app" {
			appIndex = i
		}
	}
	require.NotEqual(b, -1, appIndex)

	b.ResetTimer()
	for i := range b.N {
		tag := fmt.Sprint(i + 2) // the pods start on app and sidecar image "1"
		// Floor: one client patches every pod's app image.
		app := "example.com/app:" + tag
		floorDone := allRunning(b, name, "app", app, pods)
		start := time.Now()
		patch := []byte(fmt.Sprintf(`[{"op":"test","path":"/spec/containers/%d/name","value":"app"},{"op":"replace","path":"/spec/containers/%[1]d/image","value":%q}]`, appIndex, app))
		parallel(b, pods, func(j int) error {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: fmt.Sprintf("pod-%d", j)}}
			return c.Patch(ctx, p, client.RawPatch(types.JSONPatchType, patch))
		})
		floorWritten := time.Since(start)
		waitDone(b, "floor applied", floorDone, func() string { return runCount(b, name, "app", app) })
		floorApplied := time.Since(start)

		// Rollout: the controller upgrades the sidecar of every pod.
		img := image(tag)
		rolloutDone := allRunning(b, name, sidecar, img, pods)
		start = time.Now()
		require.NoError(b, retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			cur := getSS(b, name)
			cur.Spec.Containers[0].Image = img
			return c.Update(ctx, cur)
		}))
		waitB(b, "rollout written", func() error {
			cur := getSS(b, name)
			if cur.Status.ObservedGeneration != cur.Generation || int(cur.Status.UpdatedPods) != pods {
				return fmt.Errorf("updated %d", cur.Status.UpdatedPods)
			}
			return nil
		})
		rolloutWritten := time.Since(start)
		waitDone(b, "rollout applied", rolloutDone, func() string { return runCount(b, name, sidecar, img) })
		rolloutApplied := time.Since(start)
		waitB(b, "status updated and ready", func() error {
			if st := getSS(b, name).Status; int(st.UpdatedReadyPods) != pods {
				return fmt.Errorf("updated and ready %d", st.UpdatedReadyPods)
			}
			return nil
		})

		b.ReportMetric(floorWritten.Seconds(), "floor-written-s")
		b.ReportMetric(floorApplied.Seconds(), "floor-applied-s")
		b.ReportMetric(rolloutWritten.Seconds(), "rollout-written-s")
		b.ReportMetric(rolloutApplied.Seconds(), "rollout-applied-s")
		b.ReportMetric(rolloutApplied.Seconds()/floorApplied.Seconds(), "applied-ratio")
	}
}

func getSS(b *testing.B, name string) *v1beta1.SidecarSet {
	ss := &v1beta1.SidecarSet{}
	require.NoError(b, cluster.Client.Get(context.Background(), client.ObjectKey{Name: name}, ss))
	return ss
}

// allRunning returns a channel closed once all pods of ns (there are pods) report container name
// running img, followed by an informer (started here, before the change it waits for, so its
// initial listing is not timed; polling 1,000 pods would load the API server it measures, and a
// bare watch can end early and lose events).
func allRunning(b *testing.B, ns, name, img string, pods int) <-chan struct{} {
	cs, err := kubernetes.NewForConfig(cluster.Config)
	require.NoError(b, err)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	var mu sync.Mutex
	running := map[string]bool{}
	done := make(chan struct{})
	stop := make(chan struct{})
	observe := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		running[p.Name] = containerStatus(p, name).Image == img
		n := 0
		for _, r := range running {
			if r {
				n++
			}
		}
		if n == pods && stop != nil {
			close(done)
			close(stop)
			stop = nil
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
	})
	require.NoError(b, err)
	factory.Start(stop)
	require.True(b, toolscache.WaitForCacheSync(nil, inf.HasSynced))
	b.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if stop != nil {
			close(stop)
			stop = nil
		}
	})
	return done
}

// waitInjected waits until the webhook injects SidecarSet name (scopedSidecarSet) into a pod
// created in dry run.
func waitInjected(b *testing.B, name string) {
	waitB(b, "injection", func() error {
		p := scopedPod(name, -1, nil)
		if err := cluster.Client.Create(context.Background(), p, client.DryRunAll); err != nil {
			return err
		}
		if len(p.Spec.Containers) != 2 {
			return fmt.Errorf("not injected yet")
		}
		return nil
	})
}

// deleteFleet deletes SidecarSet name and the pods of namespace name (at once: grace period 0),
// and waits until the API server lists none of them, so that the next benchmark does not share the
// machine with their deletion.
func deleteFleet(b *testing.B, name string) {
	ctx := context.Background()
	c := cluster.Client
	_ = c.Delete(ctx, scopedSidecarSet(name))
	waitB(b, "pods deleted", func() error {
		// Deleting 10,000 pods can outlast the API server's request timeout, which ends the
		// deletion part way: each try deletes what is left.
		if err := c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(name), client.GracePeriodSeconds(0)); err != nil {
			return err
		}
		var l metav1.PartialObjectMetadataList
		l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := c.List(ctx, &l, client.InNamespace(name), client.Limit(1)); err != nil {
			return err
		}
		if len(l.Items) > 0 {
			return fmt.Errorf("pods left in %s", name)
		}
		return nil
	})
}

// parallel runs do(0..n-1) with benchWriters at a time and fails on any error.
func parallel(b *testing.B, n int, do func(int) error) {
	if errs := devcluster.Parallel(n, benchWriters, do); len(errs) > 0 {
		b.Fatalf("%d of %d writes failed, the first: %v", len(errs), n, errs[0])
	}
}

func waitDone(b *testing.B, what string, done <-chan struct{}, state func() string) {
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%s: not within 5 minutes: %s", what, state())
	}
}

// runCount says how many pods of ns the API server shows running img in container name.
func runCount(b *testing.B, ns, name, img string) string {
	var l corev1.PodList
	require.NoError(b, cluster.Client.List(context.Background(), &l, client.InNamespace(ns)))
	n, spec := 0, 0
	for i := range l.Items {
		if containerStatus(&l.Items[i], name).Image == img {
			n++
		}
		if specImage(&l.Items[i], name) == img {
			spec++
		}
	}
	return fmt.Sprintf("%d of %d pods have the image in spec, %d report running it", spec, len(l.Items), n)
}

func waitB(b *testing.B, what string, f func() error) {
	start := time.Now()
	deadline := start.Add(5 * time.Minute)
	report := start.Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		if time.Now().After(report) {
			fmt.Fprintf(os.Stderr, "%s: still waiting after %s: %v\n", what, time.Since(start).Round(time.Second), err)
			report = report.Add(30 * time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("%s: %v", what, err)
}
