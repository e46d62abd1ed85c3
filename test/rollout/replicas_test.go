package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
)

// replicas runs two manager processes with leader election, as two pods of the Deployment, their
// webhook servers on the ports given (cluster.Manager's is the one the API server calls). Leases are
// short so that a hand-over takes seconds, not 15. Cleanup stops whatever still runs and brings the
// in-process manager back for the other tests.
func replicas(t *testing.T, firstPort, secondPort int) (first, second *devcluster.ManagerProcess) {
	t.Helper()
	bin := buildCommand(t, "sidecarops-manager")
	saved := cluster.Manager
	var started []*devcluster.ManagerProcess
	t.Cleanup(func() {
		for _, p := range started {
			_ = p.Terminate() // a pod's stop: the lease is given up for the next test's manager
		}
		cluster.Manager = saved
		require.NoError(t, cluster.RestartManager(testCtx(t)))
	})
	cluster.Manager.LeaderElection = true
	cluster.Manager.LeaseDuration, cluster.Manager.RenewDeadline, cluster.Manager.RetryPeriod = 3*time.Second, 2*time.Second, 250*time.Millisecond
	start := func(port int) *devcluster.ManagerProcess {
		var err error
		cluster.Manager.WebhookPort = port
		cluster.Manager.ProbeAddr, err = devcluster.FreeAddr()
		require.NoError(t, err)
		p, err := cluster.StartManagerProcess(testCtx(t), bin)
		require.NoError(t, err)
		devcluster.LogsOnFailure(t, p)
		started = append(started, p)
		return p
	}
	first = start(firstPort)
	eventually(t, "the first replica leads", func() error {
		if leaseHolder(t) == "" {
			return errors.New("no holder yet")
		}
		return nil
	})
	second = start(secondPort)
	cluster.Manager.WebhookPort = saved.WebhookPort
	return first, second
}

func freePort(t *testing.T) int {
	t.Helper()
	addr, err := devcluster.FreeAddr()
	require.NoError(t, err)
	_, port, _ := net.SplitHostPort(addr)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	return p
}

// Two replicas: the leader is SIGKILLed mid-rollout (its lease still held); the other takes the
// lease over and finishes the rollout. At no watched moment is maxUnavailable exceeded, every pod
// survives, and each is upgraded exactly once (kwok counts the in-place restarts).
func TestLeaderKilledMidRolloutTheOtherReplicaFinishes(t *testing.T) {
	const n, budget = 8, 2
	f := newFleet(t, "handover", n, func(ss *v1beta1.SidecarSet) {
		ss.Spec.UpdateStrategy.MaxUnavailable = ptrIntStr(intstr.FromInt32(budget))
	}, nil)
	uids := f.uids()
	leader, _ := replicas(t, freePort(t), cluster.Manager.WebhookPort)
	leaderID := leaseHolder(t)

	pw, peak := budgetWatch(f, image("2"), budget)
	f.update(func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].Image = image("2") })
	f.waitPartlyMoved(image("2"))
	require.NoError(t, leader.Kill())
	killed := time.Now()

	f.waitStatus(counts{n, n, n, n})
	pw.check(t)
	holder := leaseHolder(t)
	assert.NotEqual(t, leaderID, holder, "the other replica holds the lease")
	t.Logf("rollout finished %s after the leader was killed; at most %d pods unavailable at once", time.Since(killed).Round(time.Millisecond), *peak)
	f.upgradedOnce(uids, image("2"))
}

// proxy spreads connections round-robin over backends, as a Service spreads them over its ready
// endpoints; remove takes a backend out, as the endpoints controller does once a pod is gone.
type proxy struct {
	l        net.Listener
	mu       sync.Mutex
	backends []string
	next     int
	conns    map[net.Conn]struct{} // open client connections, closed with the proxy
	wg       sync.WaitGroup
}

func startProxy(t *testing.T, addr string, backends ...string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	p := &proxy{l: l, backends: backends, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() {
		_ = l.Close()
		// The API server keeps idle connections open for minutes.
		p.mu.Lock()
		for c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.serve(c) }()
		}
	}()
	return p
}

func (p *proxy) serve(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = struct{}{}
	backend := p.backends[p.next%len(p.backends)]
	p.next++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		_ = c.Close()
	}()
	// A dead endpoint still listed refuses the connection, and the API server's call fails: what
	// a Service does between a pod's death and its endpoint's removal.
	b, err := net.DialTimeout("tcp", backend, time.Second)
	if err != nil {
		return
	}
	defer b.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
	<-done
}

func (p *proxy) remove(backend string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, b := range p.backends {
		if b == backend {
			p.backends = append(p.backends[:i], p.backends[i+1:]...)
			return
		}
	}
}

// Two webhook replicas behind one endpoint; one is SIGKILLed during a burst of 1,000 pod
// creations. No pod is admitted without its sidecar: each the client created exists with it, or
// got an error it may retry (the call to the dead replica failed and failurePolicy Fail refused
// the pod), and retried, it is created with its sidecar.
func TestWebhookReplicaKilledDuringABurst(t *testing.T) {
	const total, workers, killAfter = 1000, 16, 300
	const ns = "burst"
	ctx := testCtx(t)
	require.NoError(t, cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	require.NoError(t, cluster.Client.Create(ctx, scopedSidecarSet(ns)))
	t.Cleanup(func() {
		_ = cluster.Client.Delete(context.Background(), scopedSidecarSet(ns))
		_ = cluster.Client.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(ns))
	})

	host := cluster.Manager.WebhookHost
	served := net.JoinHostPort(host, strconv.Itoa(cluster.Manager.WebhookPort))
	portA, portB := freePort(t), freePort(t)
	first, _ := replicas(t, portA, portB)
	a, b := net.JoinHostPort(host, strconv.Itoa(portA)), net.JoinHostPort(host, strconv.Itoa(portB))
	lb := startProxy(t, served, a, b)
	began := time.Now()

	pod := func(i int) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("pod-%d", i), Labels: map[string]string{"app": ns}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}},
		}
	}
	var (
		created  atomic.Int32
		killOnce sync.Once
		mu       sync.Mutex
		refused  = map[int]error{}
		next     atomic.Int32
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < total; i = int(next.Add(1)) - 1 {
				if err := cluster.Client.Create(ctx, pod(i)); err != nil {
					mu.Lock()
					refused[i] = err
					mu.Unlock()
					continue
				}
				if created.Add(1) == killAfter {
					killOnce.Do(func() {
						wg.Add(1) // this worker is still counted, so Wait has not returned
						go func() {
							defer wg.Done()
							assert.NoError(t, first.Kill())
							// The endpoints controller drops a dead pod's endpoint within moments.
							time.Sleep(300 * time.Millisecond)
							lb.remove(a)
						}()
					})
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d of %d pods created in the burst (%s), %d refused", created.Load(), total, time.Since(began).Round(time.Millisecond), len(refused))

	for i, err := range refused {
		require.True(t, apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) ||
			apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err), "pod-%d: an error a client cannot retry: %v", i, err)
		eventually(t, fmt.Sprintf("pod-%d created on retry", i), func() error {
			return client.IgnoreAlreadyExists(cluster.Client.Create(ctx, pod(i)))
		})
	}
	var list corev1.PodList
	require.NoError(t, cluster.Client.List(ctx, &list, client.InNamespace(ns)))
	require.Len(t, list.Items, total, "every pod exists")
	without := 0
	for i := range list.Items {
		if specImage(&list.Items[i], sidecar) == "" {
			without++
		}
	}
	assert.Zero(t, without, "pods admitted without their sidecar")
	t.Logf("checked after %s", time.Since(began).Round(time.Millisecond))
}
