package rollout

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

func ip(v intstr.IntOrString) *intstr.IntOrString { return &v }

// TestBatchSizesC13 restates compat §4.6 C13 and the compat §3.7 worked numbers.
func TestBatchSizesC13(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		total, upgraded, ready    int
		maxUnavailable, partition *intstr.IntOrString
		want                      int
	}{
		{"100/30/26 max 10", 100, 30, 26, ip(intstr.FromInt32(10)), nil, 6},
		{"1000/300/260 max 10%", 1000, 300, 260, ip(intstr.FromString("10%")), nil, 60},
		{"1000/300/250 max 5%", 1000, 300, 250, ip(intstr.FromString("5%")), nil, 0},
		{"100/30/27 max 100", 100, 30, 27, ip(intstr.FromInt32(100)), nil, 70},
		{"1000/800/760 partition 180", 1000, 800, 760, ip(intstr.FromInt32(100)), ip(intstr.FromInt32(180)), 20},
		{"1000/800/760 partition 100", 1000, 800, 760, ip(intstr.FromInt32(100)), ip(intstr.FromInt32(100)), 60},
		{"1000/800/760 partition 18%", 1000, 800, 760, ip(intstr.FromInt32(100)), ip(intstr.FromString("18%")), 20},
		{"1000/800/760 partition 10%", 1000, 800, 760, ip(intstr.FromInt32(100)), ip(intstr.FromString("10%")), 60},
		{"5 pods max 5% rounds up", 5, 0, 0, ip(intstr.FromString("5%")), nil, 1},
		{"5 pods partition 99% capped at 4", 5, 0, 0, ip(intstr.FromInt32(5)), ip(intstr.FromString("99%")), 1},
		{"5 pods partition 1% rounds up to 1", 5, 0, 0, ip(intstr.FromInt32(5)), ip(intstr.FromString("1%")), 4},
		{"default maxUnavailable 1", 10, 0, 0, nil, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss := ssC13()
			ss.Spec.UpdateStrategy.MaxUnavailable = tc.maxUnavailable
			ss.Spec.UpdateStrategy.Partition = tc.partition
			p := NextUpgrade(ss, c13Pods(tc.total, tc.upgraded, tc.ready))
			assert.Len(t, p.Upgrade, tc.want)
			assert.Empty(t, p.Warnings)
		})
	}
}

func TestSelectorAndNotUpgradableC13(t *testing.T) {
	ss := ssC13()
	ss.Spec.UpdateStrategy.MaxUnavailable = ip(intstr.FromInt32(100))
	ss.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "test"}}
	pods := c13Pods(1000, 0, 0)
	for i := 0; i < 30; i++ {
		pods[i*33].Labels["app"] = "test"
	}
	p := NextUpgrade(ss, pods)
	assert.Len(t, p.Upgrade, 30)
	assert.Len(t, p.HeldBySelector, 970)

	ss = ssC13()
	ss.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation] = "without-bbb"
	p = NextUpgrade(ss, c13Pods(100, 0, 0))
	assert.Empty(t, p.Upgrade)
	assert.Len(t, p.NotUpgradable, 100)
	assert.Contains(t, p.NotUpgradable[0].Reason, "hash-without-image differs")
}

func TestOrderC15toC18(t *testing.T) {
	base := func() ([]*corev1.Pod, *v1beta1.SidecarSet) {
		ss := ssC13()
		ss.Spec.UpdateStrategy.MaxUnavailable = ip(intstr.FromInt32(10))
		return c13Pods(20, 10, 5), ss
	}
	// C15: 5 slots, newest first.
	pods, ss := base()
	assert.Equal(t, []string{"pod-19", "pod-18", "pod-17", "pod-16", "pod-15"}, names(NextUpgrade(ss, pods).Upgrade))

	// C16: not-ready candidates first and outside the budget.
	pods, ss = base()
	notReady(pods[10])
	notReady(pods[13])
	assert.Equal(t, []string{"pod-13", "pod-10", "pod-19", "pod-18", "pod-17", "pod-16", "pod-15"}, names(NextUpgrade(ss, pods).Upgrade))

	// C17: weight priority, 2 slots.
	pods = c13Pods(20, 10, 2)
	ss = ssC13()
	ss.Spec.UpdateStrategy.MaxUnavailable = ip(intstr.FromInt32(10))
	ss.Spec.UpdateStrategy.PriorityStrategy = &v1beta1.UpdatePriorityStrategy{WeightPriority: []v1beta1.UpdatePriorityWeightTerm{
		{Weight: 50, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"test-key": "foo"}}},
		{Weight: 30, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"test-key": "bar"}}},
	}}
	pods[16].Labels["test-key"] = "foo"
	pods[15].Labels["test-key"] = "bar"
	assert.Equal(t, []string{"pod-16", "pod-15"}, names(NextUpgrade(ss, pods).Upgrade))

	// C18: order priority.
	pods = c13Pods(20, 10, 2)
	ss.Spec.UpdateStrategy.PriorityStrategy = &v1beta1.UpdatePriorityStrategy{OrderPriority: []v1beta1.UpdatePriorityOrderTerm{{OrderedKey: "key1"}}}
	for _, p := range pods {
		p.Labels["key1"] = "5"
	}
	pods[17].Labels["key1"] = "10"
	pods[18].Labels["key1"] = "20"
	assert.Equal(t, []string{"pod-18", "pod-17"}, names(NextUpgrade(ss, pods).Upgrade))
}

// Quirk Q13 and U2: pods without any ordered key go first; suffix compared as integers.
func TestOrderPriorityQuirk13(t *testing.T) {
	mk := func(name string, l map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	}
	pods := []*corev1.Pod{mk("k1-5", map[string]string{"key1": "5"}), mk("none", nil), mk("k2-7", map[string]string{"key2": "7"}),
		mk("k1-9", map[string]string{"key1": "9"}), mk("sts-10", map[string]string{"key1": "sts-10"}), mk("sts-5", map[string]string{"key1": "sts-5"})}
	sortByPriority(&v1beta1.UpdatePriorityStrategy{OrderPriority: []v1beta1.UpdatePriorityOrderTerm{{OrderedKey: "key1"}, {OrderedKey: "key2"}}}, pods)
	assert.Equal(t, []string{"none", "sts-10", "k1-9", "k1-5", "sts-5", "k2-7"}, names(pods))
}

func TestExpandScatterC14(t *testing.T) {
	terms := v1beta1.UpdateScatterStrategy{{Key: "key-1", Value: "value-1"}, {Key: "key-2", Value: "value-2"}, {Key: "key-3", Value: "value-3"}}
	assert.Equal(t, terms, ExpandScatter(terms, nil))
	var pods []*corev1.Pod
	for _, v := range []string{"value-4-0", "value-4-1", "value-4-2", "value-4", "value-4", "value-4"} {
		pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"key-4": v}}})
	}
	pods = append(pods, nil, &corev1.Pod{})
	got := ExpandScatter(append(terms, v1beta1.UpdateScatterTerm{Key: "key-4", Value: "*"}), pods)
	want := append(append(v1beta1.UpdateScatterStrategy{}, terms...),
		v1beta1.UpdateScatterTerm{Key: "key-4", Value: "value-4-0"}, v1beta1.UpdateScatterTerm{Key: "key-4", Value: "value-4-1"},
		v1beta1.UpdateScatterTerm{Key: "key-4", Value: "value-4-2"}, v1beta1.UpdateScatterTerm{Key: "key-4", Value: "value-4"})
	assert.Equal(t, want, got)
}

func TestScatterSpreads(t *testing.T) {
	// 6 candidates, 3 labelled zone=a: they must not all come first.
	pods := c13Pods(6, 0, 0)
	for _, i := range []int{3, 4, 5} {
		pods[i].Labels["zone"] = "a"
	}
	ss := ssC13()
	ss.Spec.UpdateStrategy.ScatterStrategy = v1beta1.UpdateScatterStrategy{{Key: "zone", Value: "a"}}
	order := Order(ss.Spec.UpdateStrategy, pods, pods)
	assert.Len(t, order, 6)
	first3 := 0
	for _, p := range order[:3] {
		if p.Labels["zone"] == "a" {
			first3++
		}
	}
	assert.Less(t, first3, 3, "scatter interleaves: %v", names(order))
}

// Pd-based controller cases C1–C5 and C9.
func TestStrategySwitchesC1toC5C9(t *testing.T) {
	pd := func() *corev1.Pod { return c13Pods(1, 0, 0)[0] }

	ss := ssC13()
	ss.Spec.UpdateStrategy.Type = v1beta1.NotUpdateSidecarSetStrategyType
	p := NextUpgrade(ss, []*corev1.Pod{pd()})
	assert.Empty(t, p.Upgrade, "C1")
	assert.Equal(t, StoppedNotUpdate, p.Stopped)
	assert.Len(t, p.HeldByMaxUnavailable, 1)

	ss = ssC13()
	ss.Spec.UpdateStrategy.Paused = true
	p = NextUpgrade(ss, []*corev1.Pod{pd()})
	assert.Empty(t, p.Upgrade, "C2")
	assert.Equal(t, StoppedPaused, p.Stopped)

	pending := pd()
	pending.Status.Phase = corev1.PodPending
	notReady(pending)
	ss = ssC13()
	ss.Spec.UpdateStrategy.MaxUnavailable = ip(intstr.FromInt32(0))
	assert.Len(t, NextUpgrade(ss, []*corev1.Pod{pending}).Upgrade, 1, "C3: not-ready pods ignore the budget")

	ss = ssC13()
	ss.Spec.UpdateStrategy.Partition = ip(intstr.FromInt32(1))
	p = NextUpgrade(ss, []*corev1.Pod{pd()})
	assert.Empty(t, p.Upgrade, "C4")
	assert.Len(t, p.HeldByPartition, 1)

	p = NextUpgrade(ssC13(), []*corev1.Pod{upgradedAndReady(pd())})
	assert.Empty(t, p.Upgrade, "C5")
	assert.Len(t, p.Updated, 1)

	// C9
	ss = ssC13()
	ss.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation] = "without-bbb"
	ss.Spec.UpdateStrategy.MaxUnavailable = ip(intstr.FromString("50%"))
	pods := c13Pods(100, 0, 0)
	for _, pod := range pods[50:] {
		pod.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation] = hashAnn("test-sidecarset", "without-bbb")
	}
	p = NextUpgrade(ss, pods)
	assert.ElementsMatch(t, names(pods[50:]), names(p.Upgrade))
	assert.Len(t, p.NotUpgradable, 50)
}

func TestPartitionReplicas(t *testing.T) {
	for _, tc := range []struct {
		p     *intstr.IntOrString
		total int
		want  int
		err   bool
	}{
		{nil, 10, 0, false},
		{ip(intstr.FromInt32(3)), 10, 3, false},
		{ip(intstr.FromInt32(30)), 10, 30, false},
		{ip(intstr.FromInt32(-2)), 10, 0, false},
		{ip(intstr.FromString("0%")), 10, 0, false},
		{ip(intstr.FromString("100%")), 10, 10, false},
		{ip(intstr.FromString("99%")), 1, 1, false},
		{ip(intstr.FromString("50%")), 0, 0, false},
		{ip(intstr.FromString("x")), 10, 0, true},
	} {
		got, err := PartitionReplicas(tc.p, tc.total)
		assert.Equal(t, tc.want, got, "%v of %d", tc.p, tc.total)
		assert.Equal(t, tc.err, err != nil)
	}
}

func TestBadStrategyFieldsWarn(t *testing.T) {
	ss := ssC13()
	ss.Spec.UpdateStrategy.MaxUnavailable = ip(intstr.FromString("ten"))
	ss.Spec.UpdateStrategy.Partition = ip(intstr.FromString("x"))
	p := NextUpgrade(ss, c13Pods(3, 0, 0))
	assert.Empty(t, p.Upgrade)
	assert.Len(t, p.Warnings, 2)

	ss = ssC13()
	ss.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bad"}}}
	p = NextUpgrade(ss, c13Pods(3, 0, 0))
	assert.Empty(t, p.Upgrade)
	assert.Len(t, p.HeldBySelector, 3)
	assert.Len(t, NextUpgrade(nil, nil).Warnings, 1)
}

// TestPlanProperties checks on random fleets: each pod is in exactly one list, no pod is chosen
// twice, no chosen pod is not upgradable or already updated, and ready pods are only chosen while
// the unavailable count stays within maxUnavailable.
// randomRound is a SidecarSet C13 and pods in random states (upgraded or not, ready or not,
// upgradable or not, spread over zones), with a random strategy (budget, partition, selector, and a
// scatter and priority order when scatter is true).
func randomRound(r *rand.Rand, scatter bool) (*v1beta1.SidecarSet, []*corev1.Pod) {
	n := r.IntN(40)
	pods := c13Pods(n, 0, 0)
	for i, p := range pods {
		switch r.IntN(6) {
		case 0:
			upgraded(p)
		case 1:
			upgradedAndReady(p)
		case 2:
			p.Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation] = hashAnn("test-sidecarset", "other")
		}
		if r.IntN(4) == 0 {
			notReady(p)
		}
		if r.IntN(3) == 0 {
			p.Labels["zone"] = fmt.Sprint(i % 3)
		}
		p.Status.ContainerStatuses[0].RestartCount = int32(r.IntN(3))
	}
	ss := ssC13()
	us := &ss.Spec.UpdateStrategy
	us.MaxUnavailable = ip(intstr.FromInt32(int32(r.IntN(6))))
	if r.IntN(2) == 0 {
		us.MaxUnavailable = ip(intstr.FromString(fmt.Sprintf("%d%%", r.IntN(60))))
	}
	if r.IntN(2) == 0 {
		us.Partition = ip(intstr.FromString(fmt.Sprintf("%d%%", r.IntN(101))))
	}
	if scatter && r.IntN(2) == 0 {
		us.ScatterStrategy = v1beta1.UpdateScatterStrategy{{Key: "zone", Value: "*"}}
	}
	if r.IntN(3) == 0 {
		us.PriorityStrategy = &v1beta1.UpdatePriorityStrategy{OrderPriority: []v1beta1.UpdatePriorityOrderTerm{{OrderedKey: "zone"}}}
	}
	if r.IntN(4) == 0 {
		us.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"1"}}}}
	}
	if r.IntN(8) == 0 {
		us.Paused = true
	}
	return ss, pods
}

func TestPlanProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 300; iter++ {
		ss, pods := randomRound(r, true)
		p := NextUpgrade(ss, pods)

		seen := map[*corev1.Pod]int{}
		for _, l := range [][]*corev1.Pod{p.Upgrade, p.Updated, p.InFlight, p.HeldBySelector, p.HeldByPartition, p.HeldByMaxUnavailable} {
			for _, pod := range l {
				seen[pod]++
			}
		}
		for _, nu := range p.NotUpgradable {
			seen[nu.Pod]++
		}
		for _, pod := range pods {
			assert.Equal(t, 1, seen[pod], "iter %d: %s in exactly one list", iter, pod.Name)
		}
		readyTaken := 0
		for _, pod := range p.Upgrade {
			can, cons := Upgradability(pod, ss)
			assert.True(t, can && cons && !IsUpdated(pod, ss), "iter %d", iter)
			if IsPodReady(pod, ss) {
				readyTaken++
			}
		}
		if readyTaken > 0 {
			assert.LessOrEqual(t, p.Unavailable+readyTaken, p.MaxUnavailable, "iter %d", iter)
		}
	}
}

// NextUpgradeOf, given the pods not updated and the counts over all, plans what NextUpgrade plans
// from every pod: the controller's rounds during a rollout read only the pods left to upgrade.
func TestNextUpgradeOfIsNextUpgrade(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 500; iter++ {
		ss, pods := randomRound(r, false)
		require.True(t, PlansFromCounts(ss))
		notUpdated, c := kept(ss, pods)
		want, got := NextUpgrade(ss, pods), NextRoundOf(ss, notUpdated, c).Plan
		want.Updated = nil
		require.Equal(t, want, got, "iter %d", iter)
	}
	ss := ssC13()
	ss.Spec.UpdateStrategy.ScatterStrategy = v1beta1.UpdateScatterStrategy{{Key: "zone", Value: "*"}}
	require.False(t, PlansFromCounts(ss), "a scatter order reads every pod")
	ss = ssC13()
	ss.Spec.Containers[0].UpgradeStrategy.UpgradeType = v1beta1.SidecarContainerHotUpgrade
	require.False(t, PlansFromCounts(ss), "hot upgrades are reset from every pod")
}
