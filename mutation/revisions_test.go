package mutation

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/sidecarset/history"
)

// revisionOf stores historical as a ControllerRevision the way the controller would: data.raw from
// sidecarset/history, the SidecarSet's hash annotations, and the labels a customVersion lookup needs.
func revisionOf(t *testing.T, historical *v1beta1.SidecarSet, customVersion string, number int64) *appsv1.ControllerRevision {
	t.Helper()
	raw, err := history.Raw(historical)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{v1beta1.SidecarSetNameLabel: historical.Name}
	if customVersion != "" {
		labels[v1beta1.SidecarSetCustomVersionLabel] = customVersion
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: history.Name(historical, raw, 0), Namespace: "kruise-system",
			Labels: labels, Annotations: historical.Annotations,
		},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: number,
	}
}

func TestInjectHistoricalRevision(t *testing.T) {
	historical := ss1()
	historical.Annotations[v1beta1.SidecarSetHashAnnotation] = "historical-hash"
	historical.Spec.InitContainers = historical.Spec.InitContainers[:1] // init-2
	historical.Spec.Containers = historical.Spec.Containers[:1]         // dns-f
	cr := revisionOf(t, historical, "sidecarset1-12345", 1)

	latest := ss1()
	latest.Status.LatestRevision = "sidecarset1-latest"
	v := "sidecarset1-12345"
	latest.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{CustomVersion: &v, Policy: v1beta1.AlwaysSidecarSetInjectRevisionPolicy}

	runInjectCases(t, []injectCase{{
		name: "W6 customVersion with policy Always injects the historical spec",
		pod:  podP1(), sets: []*v1beta1.SidecarSet{latest}, revs: staticRevisions(cr),
		check: func(t *testing.T, res Result) {
			mustEqual(t, "initContainers", names(res.Pod.Spec.InitContainers), []string{"init-0", "init-2"})
			mustEqual(t, "containers", names(res.Pod.Spec.Containers), []string{"dns-f", "nginx"})
			mustEqual(t, "hash", res.Pod.Annotations[v1beta1.SidecarSetHashAnnotation],
				`{"sidecarset1":`+upgradeJSON("sidecarset1", "historical-hash", []string{"dns-f"}, cr.Name)+`}`)
		},
	}})
}

// canarySet restates the W7–W14 SidecarSet: the latest spec runs the canary image, revision X the
// stable one, and new pods labelled canary=true are the ones that may get the latest.
func canarySet(mut func(*v1beta1.SidecarSet)) *v1beta1.SidecarSet {
	ss := newSidecarSet("sidecarset1", "canary-hash")
	ss.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "demo"}}
	ss.Spec.Containers = []v1beta1.SidecarContainer{sc("sidecar", "sidecar-image:canary", "")}
	ss.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
	x := "X"
	ss.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{CustomVersion: &x, Policy: v1beta1.PartialSidecarSetInjectRevisionPolicy}
	ss.Status.LatestRevision = "sidecarset1-latest"
	if mut != nil {
		mut(ss)
	}
	return ss
}

func TestInjectPartialRevision(t *testing.T) {
	stable := canarySet(nil)
	stable.Annotations[v1beta1.SidecarSetHashAnnotation] = "stable-hash"
	stable.Spec.Containers[0].Image = "sidecar-image:stable"
	stableCR := revisionOf(t, stable, "X", 3)
	revs := staticRevisions(stableCR)

	pod := func(canary bool) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "demo"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
		}
		if canary {
			p.Labels["canary"] = "true"
		}
		return p
	}
	partition := func(p string) func(*v1beta1.SidecarSet) {
		return func(ss *v1beta1.SidecarSet) { v := intstr.FromString(p); ss.Spec.UpdateStrategy.Partition = &v }
	}
	image := func(want string) func(*testing.T, Result) {
		return func(t *testing.T, res Result) {
			mustEqual(t, "containers", names(res.Pod.Spec.Containers), []string{"app", "sidecar"})
			mustEqual(t, "image", res.Pod.Spec.Containers[1].Image, want)
			hash, rev := "canary-hash", "sidecarset1-latest"
			if want == "sidecar-image:stable" {
				hash, rev = "stable-hash", stableCR.Name
			}
			mustEqual(t, "hash", res.Pod.Annotations[v1beta1.SidecarSetHashAnnotation],
				`{"sidecarset1":`+upgradeJSON("sidecarset1", hash, []string{"sidecar"}, rev)+`}`)
		}
	}
	half := func() float64 { return 0.5 }

	runInjectCases(t, []injectCase{
		{name: "W7 pod outside updateStrategy.selector gets the stable revision",
			pod: pod(false), sets: []*v1beta1.SidecarSet{canarySet(nil)}, revs: revs, rand: half,
			check: image("sidecar-image:stable")},
		{name: "W8 canary pod, no partition, gets the latest",
			pod: pod(true), sets: []*v1beta1.SidecarSet{canarySet(nil)}, revs: revs, rand: half,
			check: image("sidecar-image:canary")},
		{name: "W9 canary pod, partition 100%, gets the stable revision",
			pod: pod(true), sets: []*v1beta1.SidecarSet{canarySet(partition("100%"))}, revs: revs, rand: half,
			check: image("sidecar-image:stable")},
		{name: "W10 canary pod, partition 0%, gets the latest",
			pod: pod(true), sets: []*v1beta1.SidecarSet{canarySet(partition("0%"))}, revs: revs, rand: half,
			check: image("sidecar-image:canary")},
		{name: "W11 unparsable percentage partition denies the pod",
			pod: pod(true), sets: []*v1beta1.SidecarSet{canarySet(partition("abc%"))}, revs: revs, rand: half,
			wantErr: []string{`"sidecarset1"`, "abc%"}},
		{name: "W12 revision X missing denies the pod",
			pod: pod(true), sets: []*v1beta1.SidecarSet{canarySet(nil)}, revs: staticRevisions(), rand: half,
			wantErr: []string{`"sidecarset1"`, "spec.injectionStrategy.revision"}},
		{name: "W13 invalid updateStrategy.selector denies the pod",
			pod: pod(true),
			sets: []*v1beta1.SidecarSet{canarySet(func(ss *v1beta1.SidecarSet) {
				ss.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "canary", Operator: "badOp", Values: []string{"true"}}}}
			})},
			revs: revs, rand: half,
			wantErr: []string{`"sidecarset1"`}},
		{name: "W14 paused update strategy injects the stable revision whatever the partition",
			pod: pod(true),
			sets: []*v1beta1.SidecarSet{canarySet(func(ss *v1beta1.SidecarSet) {
				partition("0%")(ss)
				ss.Spec.UpdateStrategy.Paused = true
			})},
			revs: revs, rand: half,
			check: image("sidecar-image:stable")},
		{name: "no revision source when a revision is configured is an error naming the SidecarSet",
			pod: pod(true), sets: []*v1beta1.SidecarSet{canarySet(nil)}, rand: half,
			wantErr: []string{`SidecarSet "sidecarset1" spec.injectionStrategy.revision`}},
	})
}
