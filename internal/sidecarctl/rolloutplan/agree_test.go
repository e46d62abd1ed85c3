package rolloutplan

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/controller"
	"github.com/sidecarops/sidecarops/controller/rollout"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

// `rollout plan` promises to show exactly what the controller does next. Both take their round from
// rollout.Decide; this holds the CLI's plan and one reconcile of the controller (over a fake API
// server holding the same SidecarSet and pods) to the same pods upgraded, the same pods marked not
// upgradable, the same Events and the same status counts, on compat §3.7's cases. The expected
// numbers are OpenKruise's arithmetic, so that two sides agreeing on nothing fails too.
func TestRolloutPlanIsWhatTheControllerDoes(t *testing.T) {
	for _, tc := range []struct {
		name          string
		strategy      func(*v1beta1.SidecarSetUpdateStrategy)
		pods          func(ss *v1beta1.SidecarSet, pods []*corev1.Pod)
		upgrades      int
		notUpgradable int
		reasons       []string
	}{{
		name:     "maxUnavailable 2 of six pods: the two newest",
		upgrades: 2,
	}, {
		name:     "two upgraded pods not running their new image yet take the budget: the rest wait, and are told why",
		pods:     func(ss *v1beta1.SidecarSet, p []*corev1.Pod) { agreeUpgraded(ss, p[0]); agreeUpgraded(ss, p[1]) },
		reasons:  []string{rollout.ReasonRolloutWaiting},
		upgrades: 0,
	}, {
		name:          "a pod whose sidecar changed beyond its image is skipped, and said so",
		pods:          func(_ *v1beta1.SidecarSet, p []*corev1.Pod) { agreeChangedBeyondImage(p[0]) },
		upgrades:      2,
		notUpgradable: 1,
		reasons:       []string{rollout.ReasonNotUpgradablePods},
	}, {
		name:     "partition 4 of six candidates leaves two",
		strategy: func(s *v1beta1.SidecarSetUpdateStrategy) { s.Partition = ptr.To(intstr.FromInt32(4)) },
		upgrades: 2,
	}, {
		name:     "partition 5 and one slot in use: nothing moves, and the plan says why",
		strategy: func(s *v1beta1.SidecarSetUpdateStrategy) { s.Partition = ptr.To(intstr.FromInt32(5)) },
		pods:     func(ss *v1beta1.SidecarSet, p []*corev1.Pod) { agreeUpgraded(ss, p[5]); agreeUpgraded(ss, p[4]) },
		reasons:  []string{rollout.ReasonRolloutWaiting},
		upgrades: 0,
	}, {
		name:     "paused: nothing, and no Event",
		strategy: func(s *v1beta1.SidecarSetUpdateStrategy) { s.Paused = true },
		upgrades: 0,
	}, {
		name: "updateStrategy.selector picks the canary",
		strategy: func(s *v1beta1.SidecarSetUpdateStrategy) {
			s.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
		},
		pods:     func(_ *v1beta1.SidecarSet, p []*corev1.Pod) { p[2].Labels["canary"] = "true" },
		upgrades: 1,
	}, {
		name:     "pods not ready are taken without using the budget (quirk Q12)",
		strategy: func(s *v1beta1.SidecarSetUpdateStrategy) { s.MaxUnavailable = ptr.To(intstr.FromInt32(1)) },
		pods: func(_ *v1beta1.SidecarSet, p []*corev1.Pod) {
			for _, pod := range p[:4] {
				pod.Status.Conditions[0].Status = corev1.ConditionFalse
			}
		},
		upgrades: 5,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ss, pods := agreeFleet(t, 6, tc.strategy)
			if tc.pods != nil {
				tc.pods(ss, pods)
			}
			p, err := Of(ss, pods, nil, 0, OfflineRevisionsHint)
			require.NoError(t, err)

			upgraded, notUpgradable, evs, status := reconcileOnce(t, ss, pods)
			assert.ElementsMatch(t, p.Upgrade, upgraded, "pods upgraded")
			assert.Len(t, upgraded, tc.upgrades)
			var planned []string
			for _, n := range p.NotUpgradable {
				planned = append(planned, n.Pod)
			}
			assert.ElementsMatch(t, planned, notUpgradable, "pods marked not upgradable")
			assert.Len(t, notUpgradable, tc.notUpgradable)
			var said, reasons []string
			for _, e := range p.Events {
				said = append(said, e.Type+" "+e.Reason+" "+e.Message)
				reasons = append(reasons, e.Reason)
			}
			assert.Equal(t, evs, said, "Events")
			assert.Equal(t, tc.reasons, reasons)
			assert.Equal(t, [4]int32{p.Status.MatchedPods, p.Status.UpdatedPods, p.Status.ReadyPods, p.Status.UpdatedReadyPods},
				[4]int32{status.MatchedPods, status.UpdatedPods, status.ReadyPods, status.UpdatedReadyPods}, "status before the round's writes")
		})
	}
}

// agreeFleet is a SidecarSet moving its sidecar proxy from :1 to :2 and n Running, Ready pods on :1,
// pod-i created i seconds after the first (so a higher i is newer), as the webhook injected them.
func agreeFleet(t *testing.T, n int, strategy func(*v1beta1.SidecarSetUpdateStrategy)) (*v1beta1.SidecarSet, []*corev1.Pod) {
	t.Helper()
	set := func(tag string) *v1beta1.SidecarSet {
		ss := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "proxy", UID: "proxy-uid", Generation: 2}}
		ss.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
		ss.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(2))
		ss.Spec.Containers = []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "example.com/proxy:" + tag}}}
		if strategy != nil {
			strategy(&ss.Spec.UpdateStrategy)
		}
		require.NoError(t, defaults.SidecarSetAndHash(ss))
		return ss
	}
	old, ss := set("1"), set("2")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var pods []*corev1.Pod
	for i := range n {
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("pod-%d", i), Namespace: "shop", UID: types.UID(fmt.Sprintf("uid-%d", i)),
				CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(i) * time.Second)),
				Labels:            map[string]string{"app": "web"},
				Annotations: map[string]string{
					v1beta1.SidecarSetListAnnotation:             "proxy",
					v1beta1.SidecarSetHashAnnotation:             agreeHash(old.Annotations[v1beta1.SidecarSetHashAnnotation]),
					v1beta1.SidecarSetHashWithoutImageAnnotation: agreeHash(old.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation]),
				},
			},
			Spec: corev1.PodSpec{NodeName: "node", Containers: []corev1.Container{
				{Name: "app", Image: "example.com/app:1"},
				{Name: "proxy", Image: "example.com/proxy:1"},
			}},
			Status: corev1.PodStatus{
				Phase:      corev1.PodRunning,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{
					{Name: "app", Image: "example.com/app:1", ImageID: "app-1", Ready: true},
					{Name: "proxy", Image: "example.com/proxy:1", ImageID: "proxy-1", Ready: true},
				},
			},
		})
	}
	return ss, pods
}

func agreeHash(h string) string {
	return fmt.Sprintf(`{"proxy":{"hash":%q,"sidecarSetName":"proxy","sidecarList":["proxy"]}}`, h)
}

// agreeUpgraded puts pod on the SidecarSet's :2 as the controller writes it, the kubelet still
// running :1 (updated, not consistent: it takes a maxUnavailable slot).
func agreeUpgraded(ss *v1beta1.SidecarSet, pod *corev1.Pod) {
	pod.Annotations[v1beta1.SidecarSetHashAnnotation] = agreeHash(ss.Annotations[v1beta1.SidecarSetHashAnnotation])
	pod.Spec.Containers[1].Image = "example.com/proxy:2"
	pod.Annotations[v1beta1.SidecarSetInplaceUpdateStateAnnotation] = `{"proxy":{"revision":"r","updateTimestamp":null,"lastContainerStatuses":{"proxy":{"imageID":"proxy-1"}}}}`
}

// agreeChangedBeyondImage records another without-image hash: the SidecarSet changed more than
// the image since the pod's injection.
func agreeChangedBeyondImage(pod *corev1.Pod) {
	pod.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation] = agreeHash("other")
}

// reconcileOnce runs one reconcile of ss over pods against a fake API server, and returns what it
// wrote: the pods upgraded (namespace/name), the pods whose SidecarSetUpgradable entry for ss it set
// false, the Events it recorded ("type reason message") and the first status it wrote.
func reconcileOnce(t *testing.T, ss *v1beta1.SidecarSet, pods []*corev1.Pod) (upgraded, notUpgradable, evs []string, status v1beta1.SidecarSetStatus) {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1beta1.AddToScheme(scheme))
	objs := []client.Object{ss.DeepCopy(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}}
	for _, p := range pods {
		objs = append(objs, p.DeepCopy())
	}
	var statuses []v1beta1.SidecarSetStatus
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&v1beta1.SidecarSet{}, &corev1.Pod{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if s, ok := obj.(*v1beta1.SidecarSet); ok {
					statuses = append(statuses, s.Status)
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}).Build()
	rec := events.NewFakeRecorder(16)
	r := &controller.Reconciler{Client: c, APIReader: c, Namespace: "sidecarops-system", Recorder: rec,
		Now: func() time.Time { return time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC) }}
	_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: ss.Name}})
	require.NoError(t, err)
	close(rec.Events)
	for e := range rec.Events {
		evs = append(evs, e)
	}
	require.NotEmpty(t, statuses, "the round wrote no status")

	var list corev1.PodList
	require.NoError(t, c.List(context.Background(), &list, client.InNamespace("shop")))
	before := map[string]string{}
	for _, p := range objs {
		if pod, ok := p.(*corev1.Pod); ok {
			before[pod.Name] = pod.Spec.Containers[1].Image
		}
	}
	for _, p := range list.Items {
		key := p.Namespace + "/" + p.Name
		if p.Spec.Containers[1].Image != before[p.Name] {
			upgraded = append(upgraded, key)
		}
		for _, cond := range p.Status.Conditions {
			var entries map[string]bool
			if cond.Type == rollout.UpgradableConditionType && json.Unmarshal([]byte(cond.Message), &entries) == nil && !entries[ss.Name] {
				if _, ok := entries[ss.Name]; ok {
					notUpgradable = append(notUpgradable, key)
				}
			}
		}
	}
	slices.Sort(upgraded)
	return upgraded, notUpgradable, evs, statuses[0]
}
