package rollout

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// Stopped says why no pod is upgraded at all this round.
type Stopped string

const (
	// StoppedNotUpdate means updateStrategy.type is NotUpdate: pods are never upgraded.
	StoppedNotUpdate Stopped = "updateStrategy.type is NotUpdate"
	// StoppedPaused means updateStrategy.paused is set: upgrades wait until it is cleared.
	StoppedPaused Stopped = "updateStrategy.paused"
	// StoppedResetting means this round resets finished hot upgrades (NextRound) and upgrades nothing.
	StoppedResetting Stopped = "hot upgrades are being reset to the empty image first"
)

// NotUpgradable is a pod whose sidecars differ from the SidecarSet's in more than images.
type NotUpgradable struct {
	Pod    *corev1.Pod
	Reason string
}

// Plan is the outcome of GetNextUpgradePods (compat §3.7) for one round, plus where every other
// managed pod stands, for the controller and for `sidecarctl rollout plan`. Every input pod is in
// exactly one list.
type Plan struct {
	// Upgrade are the pods to upgrade now, in order. Empty when Stopped is set.
	Upgrade []*corev1.Pod
	// Stopped, when set, means the controller upgrades nothing and marks nothing this round
	// (OpenKruise returns before choosing pods); the lists below are still filled for display.
	Stopped Stopped
	// Updated already run the SidecarSet's hash.
	Updated []*corev1.Pod
	// NotUpgradable need more than an image change; the controller sets their
	// SidecarSetUpgradable entry to false (unless Stopped).
	NotUpgradable []NotUpgradable
	// InFlight are upgradable but a previous upgrade is not applied by the kubelet yet.
	InFlight []*corev1.Pod
	// HeldBySelector do not match updateStrategy.selector.
	HeldBySelector []*corev1.Pod
	// HeldByPartition are the last candidates in upgrade order, kept on the old version.
	HeldByPartition []*corev1.Pod
	// HeldByMaxUnavailable are candidates that did not fit the budget this round (or, when
	// Stopped, every candidate), in upgrade order.
	HeldByMaxUnavailable []*corev1.Pod

	// Partition and MaxUnavailable are the resolved numbers; Unavailable the updated pods already
	// unavailable before this round.
	Partition, MaxUnavailable, Unavailable int
	// Warnings report unusable strategy fields, which OpenKruise treats as 0 / "select nothing".
	Warnings []string
}

// NextUpgrade plans one round of in-place upgrades of ss over its managed pods (those passing
// IsManaged), exactly as OpenKruise's GetNextUpgradePods and calculateUpgradeCount (compat §3.7):
//
//  1. candidates: not updated, matching updateStrategy.selector, upgradable and consistent;
//  2. ordered by active-pods order, then priorityStrategy, then scatterStrategy;
//  3. the last `partition` candidates are held (partition resolved against all pods, quirk Q11);
//  4. walking the rest: a not-ready candidate is always taken without using the budget (quirk
//     12); a ready one only while the unavailable count (updated pods not consistent or not
//     ready, plus ready candidates taken) stays below maxUnavailable; the walk stops at the first
//     ready candidate that does not fit.
func NextUpgrade(ss *v1beta1.SidecarSet, pods []*corev1.Pod) Plan {
	all := make([]*corev1.Pod, 0, len(pods))
	unavailable := 0
	for _, pod := range pods {
		if pod == nil {
			continue
		}
		all = append(all, pod)
		if ss != nil && IsUnavailableUpdated(pod, ss) {
			unavailable++
		}
	}
	return nextUpgrade(ss, all, all, len(all), unavailable)
}

// PlansFromCounts reports whether NextRoundOf can plan ss's rounds: not with a scatterStrategy,
// which orders the candidates by how every pod is spread, nor with hot upgrades, whose finished
// upgrades are found among every pod (NextRound's resets).
func PlansFromCounts(ss *v1beta1.SidecarSet) bool {
	return ss != nil && ss.Spec.UpdateStrategy.ScatterStrategy == nil && !HotUpgrades(ss)
}

// HotUpgrades reports whether ss has a sidecar upgraded hot (compat §3.9).
func HotUpgrades(ss *v1beta1.SidecarSet) bool {
	for i := range ss.Spec.Containers {
		if isHot(&ss.Spec.Containers[i]) {
			return true
		}
	}
	return false
}

// NextUpgradeOf plans the same round as NextUpgrade from what the controller keeps as pods come and
// go, rather than from every managed pod: notUpdated are the managed pods not on ss's hash, and c
// the status counts over all of them (the budget's size is c.Matched; the updated pods taking a
// slot, c.Updated − c.UpdatedReady: updated and not both consistent and ready). Plan.Updated is
// then empty. ss must pass PlansFromCounts.
func NextUpgradeOf(ss *v1beta1.SidecarSet, notUpdated []*corev1.Pod, c Counts) Plan {
	return nextUpgrade(ss, notUpdated, nil, int(c.Matched), int(c.Updated-c.UpdatedReady))
}

// nextUpgrade plans over pods, total managed pods of which unavailable updated ones take a budget
// slot; all are every managed pod, which only a scatterStrategy reads.
func nextUpgrade(ss *v1beta1.SidecarSet, pods, all []*corev1.Pod, total, unavailable int) Plan {
	var p Plan
	if ss == nil {
		p.Warnings = append(p.Warnings, "no SidecarSet")
		return p
	}
	strategy := ss.Spec.UpdateStrategy
	switch {
	case strategy.Type == v1beta1.NotUpdateSidecarSetStrategyType:
		p.Stopped = StoppedNotUpdate
	case strategy.Paused:
		p.Stopped = StoppedPaused
	}

	selected := func(*corev1.Pod) bool { return true }
	if strategy.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(strategy.Selector)
		if err != nil {
			p.Warnings = append(p.Warnings, fmt.Sprintf("updateStrategy.selector: %v (no pod is selected)", err))
			selected = func(*corev1.Pod) bool { return false }
		} else {
			selected = func(pod *corev1.Pod) bool { return sel.Matches(labels.Set(pod.Labels)) }
		}
	}

	var candidates []*corev1.Pod
	for _, pod := range pods {
		switch {
		case IsUpdated(pod, ss):
			p.Updated = append(p.Updated, pod)
		case !selected(pod):
			p.HeldBySelector = append(p.HeldBySelector, pod)
		default:
			canUpgrade, consistent := Upgradability(pod, ss)
			switch {
			case !canUpgrade:
				p.NotUpgradable = append(p.NotUpgradable, NotUpgradable{Pod: pod, Reason: NotUpgradableReason(pod, ss)})
			case !consistent:
				p.InFlight = append(p.InFlight, pod)
			default:
				candidates = append(candidates, pod)
			}
		}
	}

	candidates = Order(strategy, all, candidates)

	var err error
	if p.Partition, err = PartitionReplicas(strategy.Partition, total); err != nil {
		p.Warnings = append(p.Warnings, fmt.Sprintf("updateStrategy.partition: %v (treated as 0)", err))
	}
	p.MaxUnavailable = 1
	if strategy.MaxUnavailable != nil {
		if p.MaxUnavailable, err = intstr.GetScaledValueFromIntOrPercent(strategy.MaxUnavailable, total, true); err != nil {
			p.MaxUnavailable = 0
			p.Warnings = append(p.Warnings, fmt.Sprintf("updateStrategy.maxUnavailable: %v (treated as 0)", err))
		}
	}
	p.Unavailable = unavailable

	keep := max(len(candidates)-max(p.Partition, 0), 0)
	p.HeldByPartition = candidates[keep:]
	candidates = candidates[:keep]

	if p.Stopped != "" {
		p.HeldByMaxUnavailable = candidates
		return p
	}
	for i, pod := range candidates {
		if !IsPodReady(pod, ss) {
			p.Upgrade = append(p.Upgrade, pod)
			continue
		}
		if unavailable >= p.MaxUnavailable {
			p.HeldByMaxUnavailable = candidates[i:]
			break
		}
		unavailable++
		p.Upgrade = append(p.Upgrade, pod)
	}
	return p
}

// PartitionReplicas is OpenKruise's CalculatePartitionReplicas: an integer is taken as is; a
// percentage of total is rounded up, and one below 100% is capped at total−1 when total > 1 so
// that a percentage partition always leaves something to upgrade. A nil partition is 0; an
// unparsable one is 0 with an error. Negative values are returned as 0.
func PartitionReplicas(partition *intstr.IntOrString, total int) (int, error) {
	if partition == nil {
		return 0, nil
	}
	v, err := intstr.GetScaledValueFromIntOrPercent(partition, total, true)
	if err != nil {
		return 0, err
	}
	if partition.Type == intstr.String {
		pct, err := strconv.ParseFloat(strings.TrimSuffix(partition.StrVal, "%"), 64)
		if err == nil && pct > 0 && v == 0 && total > 0 {
			v = 1
		}
		if err == nil && pct < 100 && total > 1 && v >= total {
			v = total - 1
		}
	}
	return max(v, 0), nil
}

// Order sorts candidates for upgrade (compat §3.7 steps 2–4): Kubernetes' active-pods order, then
// priorityStrategy, then scatterStrategy, whose `*` values are expanded from all (the managed
// pods). The result is a new slice; ties keep the input order.
func Order(strategy v1beta1.SidecarSetUpdateStrategy, all, candidates []*corev1.Pod) []*corev1.Pod {
	out := append([]*corev1.Pod(nil), candidates...)
	sort.SliceStable(out, func(i, j int) bool { return activePodsLess(out[i], out[j]) })
	if ps := strategy.PriorityStrategy; ps != nil && (len(ps.WeightPriority) > 0 || len(ps.OrderPriority) > 0) {
		sortByPriority(ps, out)
	}
	if strategy.ScatterStrategy != nil {
		out = scatter(ExpandScatter(strategy.ScatterStrategy, all), all, out)
	}
	return out
}

var phaseOrdinal = map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}

// activePodsLess is Kubernetes' controller.ActivePods.Less: unscheduled < scheduled; Pending <
// Unknown < Running; not ready < ready; ready for less time first; more restarts first; newer
// (or no) creation time first.
func activePodsLess(a, b *corev1.Pod) bool {
	if a.Spec.NodeName != b.Spec.NodeName && (a.Spec.NodeName == "" || b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if pa, pb := phaseOrdinal[a.Status.Phase], phaseOrdinal[b.Status.Phase]; pa != pb {
		return pa < pb
	}
	ra, rb := podConditionReady(a), podConditionReady(b)
	if ra != rb {
		return !ra
	}
	if ra && rb {
		ta, tb := readyCondition(a).LastTransitionTime, readyCondition(b).LastTransitionTime
		if !ta.Equal(&tb) {
			return afterOrZero(ta, tb)
		}
	}
	if ma, mb := maxRestarts(a), maxRestarts(b); ma != mb {
		return ma > mb
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return afterOrZero(a.CreationTimestamp, b.CreationTimestamp)
	}
	return false
}

func afterOrZero(a, b metav1.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero()
	}
	return a.After(b.Time)
}

func maxRestarts(pod *corev1.Pod) int32 {
	var m int32
	for i := range pod.Status.ContainerStatuses {
		m = max(m, pod.Status.ContainerStatuses[i].RestartCount)
	}
	return m
}

// sortByPriority is OpenKruise's priority sorter: weight terms add their weight when their
// selector matches (unparsable selectors are skipped), higher total first; order terms group pods
// by the first orderedKey they carry (term order) and then by the integer suffix of its value,
// higher first. Pods carrying none of the keys get level −1 and go first (quirk Q13).
func sortByPriority(ps *v1beta1.UpdatePriorityStrategy, pods []*corev1.Pod) {
	if len(ps.WeightPriority) > 0 {
		sels := make([]labels.Selector, len(ps.WeightPriority))
		for i := range ps.WeightPriority {
			if s, err := metav1.LabelSelectorAsSelector(&ps.WeightPriority[i].MatchSelector); err == nil {
				sels[i] = s
			}
		}
		weight := func(pod *corev1.Pod) int64 {
			var w int64
			for i, s := range sels {
				if s != nil && s.Matches(labels.Set(pod.Labels)) {
					w += int64(ps.WeightPriority[i].Weight)
				}
			}
			return w
		}
		sort.SliceStable(pods, func(i, j int) bool { return weight(pods[i]) > weight(pods[j]) })
		return
	}
	order := func(pod *corev1.Pod) (int64, int64) {
		for i, t := range ps.OrderPriority {
			if v, ok := pod.Labels[t.OrderedKey]; ok {
				return int64(i), intSuffix(v)
			}
		}
		return -1, 0
	}
	sort.SliceStable(pods, func(i, j int) bool {
		li, oi := order(pods[i])
		lj, oj := order(pods[j])
		if li != lj {
			return li < lj
		}
		return oi > oj
	})
}

// intSuffix is the integer formed by the trailing digits of v ("sts-10" → 10), 0 if none or too
// large.
func intSuffix(v string) int64 {
	start := len(v)
	for start > 0 && v[start-1] >= '0' && v[start-1] <= '9' {
		start--
	}
	n, err := strconv.ParseInt(v[start:], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// ExpandScatter replaces each `key=*` term by one term per value of that label among pods, in
// first-seen order, and drops duplicate terms (C14).
func ExpandScatter(terms v1beta1.UpdateScatterStrategy, pods []*corev1.Pod) v1beta1.UpdateScatterStrategy {
	out := v1beta1.UpdateScatterStrategy{}
	add := func(t v1beta1.UpdateScatterTerm) {
		for _, o := range out {
			if o == t {
				return
			}
		}
		out = append(out, t)
	}
	for _, t := range terms {
		if t.Value != "*" {
			add(t)
			continue
		}
		for _, pod := range pods {
			if pod == nil {
				continue
			}
			if v, ok := pod.Labels[t.Key]; ok {
				add(v1beta1.UpdateScatterTerm{Key: t.Key, Value: v})
			}
		}
	}
	return out
}

// scatter is OpenKruise's scatter sorter: for each term (most matching candidates first) it
// interleaves candidates carrying key=value with the others, with group sizes taken from the
// density of matching pods among all pods, so that one label value is not upgraded all at once.
func scatter(terms v1beta1.UpdateScatterStrategy, all, idx []*corev1.Pod) []*corev1.Pod {
	if len(terms) == 0 || len(idx) <= 1 {
		return idx
	}
	for _, t := range scatterTerms(terms, idx) {
		idx = scatterByTerm(t, all, idx)
	}
	return idx
}

func scatterTerms(terms v1beta1.UpdateScatterStrategy, idx []*corev1.Pod) []v1beta1.UpdateScatterTerm {
	if len(terms) == 1 {
		return terms
	}
	var out []v1beta1.UpdateScatterTerm
	count := map[v1beta1.UpdateScatterTerm]int{}
	for _, t := range terms {
		for _, pod := range idx {
			if v, ok := pod.Labels[t.Key]; ok && v == t.Value {
				if count[t] == 0 {
					out = append(out, t)
				}
				count[t]++
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return count[out[i]] > count[out[j]] })
	return out
}

func scatterByTerm(t v1beta1.UpdateScatterTerm, all, idx []*corev1.Pod) []*corev1.Pod {
	var matched, unmatched []*corev1.Pod
	for _, pod := range idx {
		if pod.Labels[t.Key] == t.Value {
			matched = append(matched, pod)
		} else {
			unmatched = append(unmatched, pod)
		}
	}
	if len(matched) <= 1 || len(unmatched) <= 1 {
		return idx
	}
	var totalMatched, totalUnmatched int
	for _, pod := range all {
		if pod.Labels[t.Key] == t.Value {
			totalMatched++
		} else {
			totalUnmatched++
		}
	}
	// The last matching candidate goes last.
	last := matched[len(matched)-1]
	matched = matched[:len(matched)-1]
	totalMatched--

	g := groupByDensity(totalMatched, totalUnmatched, len(matched), len(unmatched))
	out := make([]*corev1.Pod, 0, len(idx))
	if g.unmatchedRemainder > 0 && g.unmatchedRemainder <= len(unmatched) {
		out = append(out, unmatched[:g.unmatchedRemainder]...)
		unmatched = unmatched[g.unmatchedRemainder:]
	}
	for i := 0; i < g.groupNum; i++ {
		matched, out = migrate(matched, out, g.matchedSize)
		unmatched, out = migrate(unmatched, out, g.unmatchedSize)
	}
	out = append(out, matched...)
	out = append(out, unmatched...)
	return append(out, last)
}

func migrate(src, dst []*corev1.Pod, size int) ([]*corev1.Pod, []*corev1.Pod) {
	if len(src) == 0 {
		return src, dst
	}
	if len(src) < size {
		return nil, append(dst, src...)
	}
	size = max(size, 0)
	return src[size:], append(dst, src[:size]...)
}

type scatterGroup struct {
	groupNum, matchedSize, unmatchedSize, unmatchedRemainder int
}

func newScatterGroup(matched, unmatched int) scatterGroup {
	g := scatterGroup{groupNum: min(matched, unmatched)}
	if g.groupNum > 0 {
		g.matchedSize = int(math.Round(float64(matched) / float64(g.groupNum)))
		g.unmatchedSize = int(math.Round(float64(unmatched) / float64(g.groupNum)))
	}
	return g
}

// groupByDensity is OpenKruise's calculateGroupByDensity, with its divisions by zero (possible
// when the pods passed are not a superset of the candidates) turned into the update-only grouping.
func groupByDensity(totalMatched, totalUnmatched, updateMatched, updateUnmatched int) scatterGroup {
	total := newScatterGroup(totalMatched, totalUnmatched)
	update := newScatterGroup(updateMatched, updateUnmatched)
	if totalMatched <= 0 || updateMatched <= 0 ||
		float32(totalUnmatched)/float32(totalMatched) >= float32(updateUnmatched)/float32(updateMatched) {
		return update
	}
	if total.matchedSize <= 0 || total.unmatchedSize <= 0 {
		return update
	}
	g := scatterGroup{matchedSize: total.matchedSize, unmatchedSize: total.unmatchedSize}
	if updateMatched/g.matchedSize < updateUnmatched/g.unmatchedSize {
		g.groupNum = updateMatched / g.matchedSize
	} else {
		g.groupNum = updateUnmatched / g.unmatchedSize
	}
	g.unmatchedRemainder = updateUnmatched - g.groupNum*g.unmatchedSize
	return g
}
