package rollout

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ssC13 is the C13 factory: hash bbb, without-image without-aaa, one cold sidecar.
func ssC13() *v1beta1.SidecarSet {
	return &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "test-sidecarset", Generation: 3, Annotations: map[string]string{
			v1beta1.SidecarSetHashAnnotation:             "bbb",
			v1beta1.SidecarSetHashWithoutImageAnnotation: "without-aaa",
		}},
		Spec: v1beta1.SidecarSetSpec{
			Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "test-sidecar", Image: "test-image:v2"}}},
		},
	}
}

func hashAnn(name, h string) string {
	return fmt.Sprintf(`{%q:{"hash":%q,"sidecarSetName":%q,"sidecarList":["test-sidecar"]}}`, name, h, name)
}

// podC13 is a Running & Ready pod on hash aaa with test-sidecar at v1, created i seconds after t0
// (so a higher i is newer).
func podC13(i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("pod-%d", i), Namespace: "default",
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(i) * time.Second)),
			Labels:            map[string]string{"app": "sidecar"},
			Annotations: map[string]string{
				v1beta1.SidecarSetHashAnnotation:             hashAnn("test-sidecarset", "aaa"),
				v1beta1.SidecarSetHashWithoutImageAnnotation: hashAnn("test-sidecarset", "without-aaa"),
				v1beta1.SidecarSetListAnnotation:             "test-sidecarset",
			},
		},
		Spec: corev1.PodSpec{NodeName: "node", Containers: []corev1.Container{
			{Name: "nginx", Image: "nginx:1"},
			{Name: "test-sidecar", Image: "test-image:v1"},
		}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "nginx", Image: "nginx:1", ImageID: "nginx-id", Ready: true},
				{Name: "test-sidecar", Image: "test-image:v1", ImageID: "v1-id", Ready: true},
			},
		},
	}
}

// upgraded puts the pod on bbb with spec v2 and the old imageID recorded, the kubelet not having
// restarted the container yet (C13 "upgraded").
func upgraded(p *corev1.Pod) *corev1.Pod {
	p.Annotations[v1beta1.SidecarSetHashAnnotation] = hashAnn("test-sidecarset", "bbb")
	p.Spec.Containers[1].Image = "test-image:v2"
	p.Annotations[v1beta1.SidecarSetInplaceUpdateStateAnnotation] =
		`{"test-sidecarset":{"revision":"bbb","updateTimestamp":null,"lastContainerStatuses":{"test-sidecar":{"imageID":"v1-id"}}}}`
	return p
}

// upgradedAndReady additionally has the kubelet report the v2 image (C13 "upgradedAndReady").
func upgradedAndReady(p *corev1.Pod) *corev1.Pod {
	upgraded(p)
	p.Status.ContainerStatuses[1].Image = "test-image:v2"
	p.Status.ContainerStatuses[1].ImageID = "v2-id"
	return p
}

func notReady(p *corev1.Pod) *corev1.Pod {
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	return p
}

// c13Pods builds total pods of which upgradedN are upgraded and readyN of those are also done.
func c13Pods(total, upgradedN, readyN int) []*corev1.Pod {
	pods := make([]*corev1.Pod, total)
	for i := range pods {
		p := podC13(i)
		switch {
		case i < readyN:
			upgradedAndReady(p)
		case i < upgradedN:
			upgraded(p)
		}
		pods[i] = p
	}
	return pods
}

func names(pods []*corev1.Pod) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func runtimeRaw(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }

// kept is what the controller keeps of pods as they come and go, for NextRoundOf: the pods not on
// ss's hash, in order, and the status counts over all.
func kept(ss *v1beta1.SidecarSet, pods []*corev1.Pod) (notUpdated []*corev1.Pod, c Counts) {
	for _, p := range pods {
		if !IsUpdated(p, ss) {
			notUpdated = append(notUpdated, p)
		}
	}
	return notUpdated, CountPods(ss, pods)
}
