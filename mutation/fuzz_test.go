package mutation

import (
	"bytes"
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/sidecarset/history"
)

// FuzzInject feeds arbitrary pod and SidecarSet JSON (one object or an array) to Inject. It must
// never panic or modify its input, and whenever it succeeds its patch, applied to the original pod
// by an independent RFC 6902 implementation, must reproduce Result.Pod exactly.
func FuzzInject(f *testing.F) {
	seed := func(pod *corev1.Pod, sets ...*v1beta1.SidecarSet) {
		f.Add(mustJSON(f, pod), mustJSON(f, sets))
	}
	seed(podP1(), ss1())
	seed(podWithStaragent(), shareSet())
	seed(podWithDevices(), deviceSet(true))
	w39 := ss1()
	w39.Spec.Containers[0].UpgradeStrategy = v1beta1.SidecarContainerUpgradeStrategy{UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "e:1"}
	always := corev1.ContainerRestartPolicyAlways
	w39.Spec.InitContainers[0].RestartPolicy = &always
	w39.Spec.InitContainers[0].UpgradeStrategy = w39.Spec.Containers[0].UpgradeStrategy
	w39.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{
		{Annotations: map[string]string{"m": `{"a":1}`}, PatchPolicy: v1beta1.SidecarSetMergePatchJsonPatchPolicy},
		{Annotations: map[string]string{"r": "x"}},
	}
	w39.Spec.ImagePullSecrets = secrets("s1", "s2")
	annotated := podP1()
	annotated.Annotations = map[string]string{"m": `{"b":2}`, v1beta1.SidecarSetHashAnnotation: `{"old":"h"}`,
		v1beta1.SidecarSetWorkingHotUpgradeContainer: `{"x":"x-2"}`}
	annotated.Spec.ImagePullSecrets = secrets("s2", "s2")
	seed(annotated, w39)
	withRevision := canarySet(nil)
	withRevision.Spec.Containers[0].ResourcesPolicy = &v1beta1.ResourcesPolicy{TargetContainersMode: "sum", TargetContainersNameRegex: ".*",
		ResourcesExpr: v1beta1.ResourcesExpr{Limits: &v1beta1.ResourceExprLimits{CPU: "cpu*50%"}}}
	seed(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"canary": "true"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}, withRevision, ss1())
	f.Add([]byte(`{}`), []byte(`{}`))
	f.Add([]byte(`{"metadata":{"annotations":{"kruise.io/sidecarset-hash":"null"}}}`), []byte(`[{"spec":{"containers":[{"name":"a"}]}}]`))

	f.Fuzz(func(t *testing.T, podJSON, setsJSON []byte) {
		pod := &corev1.Pod{}
		if err := json.Unmarshal(podJSON, pod); err != nil {
			return
		}
		var sets []*v1beta1.SidecarSet
		if err := json.Unmarshal(setsJSON, &sets); err != nil {
			one := &v1beta1.SidecarSet{}
			if err := json.Unmarshal(setsJSON, one); err != nil {
				return
			}
			sets = []*v1beta1.SidecarSet{one}
		}
		if len(sets) > 8 {
			return // bounded work per input; more SidecarSets add nothing new
		}
		before := mustJSON(t, pod)
		in := Input{Pod: pod, SidecarSets: sets, History: selfRevisions(sets)}
		res, err := fixedInjector().Inject(in)
		if !bytes.Equal(before, mustJSON(t, pod)) {
			t.Fatal("Inject modified the input pod")
		}
		if err != nil {
			return
		}
		checkPatch(t, pod, res)
		if msg := patchOnlyMismatch(t, fixedInjector(), in, res); msg != "" {
			t.Fatal(msg)
		}
	})
}

// selfRevisions offers, for every SidecarSet that asks for a revision, a revision recording that
// SidecarSet itself under the name and custom version it asks for, so the fuzzer reaches the
// restore path rather than stopping at "revision not found".
func selfRevisions(sets []*v1beta1.SidecarSet) history.Source {
	var crs []*appsv1.ControllerRevision
	for _, ss := range sets {
		if ss == nil || ss.Spec.InjectionStrategy.Revision == nil {
			continue
		}
		raw, err := history.Raw(ss)
		if err != nil {
			continue
		}
		r := ss.Spec.InjectionStrategy.Revision
		cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: ss.Name + "-rev",
			Labels: map[string]string{v1beta1.SidecarSetNameLabel: ss.Name}}, Data: runtime.RawExtension{Raw: raw}, Revision: 1}
		if r.RevisionName != nil {
			cr.Name = *r.RevisionName
		}
		if r.CustomVersion != nil {
			cr.Labels[v1beta1.SidecarSetCustomVersionLabel] = *r.CustomVersion
		}
		crs = append(crs, cr)
	}
	return history.NewStaticSource(crs...)
}
