package mutation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

func resourceList(cpu, memory string) corev1.ResourceList {
	l := corev1.ResourceList{}
	if cpu != "" {
		l[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		l[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return l
}

func quantities(l corev1.ResourceList) map[string]string {
	out := map[string]string{}
	for k, q := range l {
		out[string(k)] = q.String()
	}
	return out
}

func TestInjectResourcesPolicy(t *testing.T) {
	// R1's pod, plus a container named like another matched SidecarSet's sidecar, which must not
	// count (compat §1.19, R11).
	pod := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "app1", Resources: corev1.ResourceRequirements{Limits: resourceList("200m", "200Mi"), Requests: resourceList("50m", "100Mi")}},
				{Name: "app2", Resources: corev1.ResourceRequirements{Limits: resourceList("400m", "400Mi"), Requests: resourceList("100m", "200Mi")}},
				{Name: "other-sidecar", Resources: corev1.ResourceRequirements{Limits: resourceList("4", "4Gi"), Requests: resourceList("4", "4Gi")}},
			}},
		}
	}
	policy := func(regex string) *v1beta1.ResourcesPolicy {
		return &v1beta1.ResourcesPolicy{
			TargetContainersMode: v1beta1.TargetContainersModeSum, TargetContainersNameRegex: regex,
			ResourcesExpr: v1beta1.ResourcesExpr{
				Limits:   &v1beta1.ResourceExprLimits{CPU: "cpu*50%", Memory: "200Mi"},
				Requests: &v1beta1.ResourceExprRequests{CPU: "cpu*50%", Memory: "100Mi"},
			},
		}
	}
	sets := func(regex string, hot bool) []*v1beta1.SidecarSet {
		a := newSidecarSet("a-resources", "h")
		c := sc("sidecar", "s:1", v1beta1.AfterAppContainerType)
		c.ResourcesPolicy = policy(regex)
		if hot {
			c.UpgradeStrategy = v1beta1.SidecarContainerUpgradeStrategy{UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "empty:1"}
		}
		a.Spec.Containers = []v1beta1.SidecarContainer{c}
		b := newSidecarSet("b-other", "h")
		b.Spec.Containers = []v1beta1.SidecarContainer{sc("other-sidecar", "o:1", "")}
		return []*v1beta1.SidecarSet{a, b}
	}
	want := func(containers ...string) func(*testing.T, Result) {
		return func(t *testing.T, res Result) {
			for _, n := range containers {
				r := findContainer(t, res.Pod.Spec.Containers, n).Resources
				mustEqual(t, n+" limits", quantities(r.Limits), map[string]string{"cpu": "300m", "memory": "200Mi"})
				mustEqual(t, n+" requests", quantities(r.Requests), map[string]string{"cpu": "75m", "memory": "100Mi"})
			}
		}
	}
	runInjectCases(t, []injectCase{
		{name: "R1 sum over the app containers, matched sidecar names excluded",
			pod: pod(), sets: sets(".*", false), check: want("sidecar")},
		{name: "both hot-upgrade twins get the computed resources",
			pod: pod(), sets: sets(".*", true), check: want("sidecar-1", "sidecar-2"),
			notIdempotent: "excludeNames are the SidecarSets' container names, as in OpenKruise, so on re-injection " +
				"the twins <name>-1/-2 already in the pod count as targets"},
		{name: "R4 no target container denies the pod, naming SidecarSet and field",
			pod: pod(), sets: sets("^nonexistent$", false),
			wantErr: []string{`SidecarSet "a-resources" spec.containers[0].resourcesPolicy`, "no containers match"}},
	})
}
