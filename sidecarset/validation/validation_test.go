package validation

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

func ptr[T any](v T) *T { return &v }

var always = corev1.ContainerRestartPolicyAlways

func badNotIn() metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: "app-name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"app-group", "app-risk-"}}
}

// TestSpecCases restates compat §4.4 V1–V20 (single-object rules). Expected counts come from the
// reference; paths are the correct Kubernetes paths of decision D4.
func TestSpecCases(t *testing.T) {
	run(t, []validCase{
		{name: "base fixture is valid", want: []want{}},
		{
			name:   "V1 no selector",
			mutate: func(ss *v1beta1.SidecarSet) { ss.Spec.Selector = nil },
			want:   []want{required("spec.selector")},
			detail: "no selector defined for SidecarSet",
		},
		{
			name: "V2 duplicated scatter term under RollingUpdate",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.UpdateStrategy.Type = v1beta1.RollingUpdateSidecarSetStrategyType
				ss.Spec.UpdateStrategy.ScatterStrategy = v1beta1.UpdateScatterStrategy{{Key: "key-1", Value: "value-1"}, {Key: "key-1", Value: "value-1"}}
			},
			want:   []want{required("spec.updateStrategy.scatterStrategy[1]")},
			detail: "duplicated key=key-1 value=value-1",
		},
		{
			// Kubernetes' selector validation and the selector conversion both fail: 2 errors.
			name: "V3 invalid NotIn value in selector",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.UpdateStrategy = v1beta1.SidecarSetUpdateStrategy{}
				ss.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{badNotIn()}
			},
			want: []want{invalid("spec.selector.matchExpressions[0].values[1]"), invalid("spec.selector")},
		},
		{
			name: "V4 invalid NotIn value in namespaceSelector",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.NamespaceSelector = &metav1.LabelSelector{
					MatchLabels:      map[string]string{"a": "b"},
					MatchExpressions: []metav1.LabelSelectorRequirement{badNotIn()},
				}
			},
			want: []want{invalid("spec.namespaceSelector.matchExpressions[0].values[1]"), invalid("spec.namespaceSelector")},
		},
		{
			name: "V5 valid namespaceSelector",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{
					{Key: "app-name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"app-group", "app-risk"}}}
				ss.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
			},
			want: []want{},
		},
		{
			name: "V6 initContainer without image",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Containers = nil
				ss.Spec.InitContainers = []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "test-sidecar"}}}
			},
			want: []want{required("spec.initContainers[0].image")},
		},
		{
			name:   "V7 neither containers nor initContainers",
			mutate: func(ss *v1beta1.SidecarSet) { ss.Spec.Containers = nil },
			want:   []want{required("spec.containers")},
			detail: "no initContainer or container defined for SidecarSet",
		},
		{
			// Un-defaulted, as in OpenKruise's test; defaulting would set "disabled".
			name: "V8 empty shareVolumePolicy (raw)",
			raw:  true,
			mutate: func(ss *v1beta1.SidecarSet) {
				c := rawSidecar("test-sidecar")
				c.ShareVolumePolicy.Type = ""
				ss.Spec.Containers = []v1beta1.SidecarContainer{c}
			},
			want:   []want{invalid("spec.containers[0].shareVolumePolicy.type")},
			detail: "unsupported share volume policy",
		},
		{
			name:   "V8 unknown shareVolumePolicy (defaulted)",
			mutate: func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].ShareVolumePolicy.Type = "sometimes" },
			want:   []want{invalid("spec.containers[0].shareVolumePolicy.type")},
		},
		{
			// Decision 5: the defaulting webhook turns a source-less volume into an emptyDir (as
			// Kubernetes does), so the V9 SidecarSet is admitted once defaulted.
			name:   "V9 volume without source, defaulted: admitted as emptyDir",
			mutate: func(ss *v1beta1.SidecarSet) { ss.Spec.Volumes = v9Volumes() },
			want:   []want{},
		},
		{
			// The same object validated raw, as OpenKruise's test does: 1 error, the source-less one.
			name: "V9 volume without source, raw",
			raw:  true,
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Containers = []v1beta1.SidecarContainer{rawSidecar("test-sidecar")}
				ss.Spec.Volumes = v9Volumes()
			},
			want:   []want{required("spec.volumes[0]")},
			detail: "must specify a volume type",
		},
		{
			name: "V10 volumeDevice without volume",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "disk0", DevicePath: "/dev/nvme1"}}
			},
			want: []want{notFound("spec.containers[0].volumeDevices[0].name")},
		},
		{
			name: "V11 volumeDevice with PVC volume",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "disk0", DevicePath: "/dev/nvme1"}}
				ss.Spec.Volumes = []corev1.Volume{pvc("disk0")}
			},
			want: []want{},
		},
		{
			name: "V12 devicePath equal to a mountPath",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "disk0", DevicePath: "/home/admin/log"}}
				ss.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "log", MountPath: "/home/admin/log"}}
				ss.Spec.Volumes = []corev1.Volume{pvc("disk0"), {Name: "log", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			},
			want: []want{
				invalid("spec.containers[0].volumeMounts[0].mountPath"),
				invalid("spec.containers[0].volumeDevices[0].devicePath"),
			},
		},
		{
			name: "V13 annotation key in two patches",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{
					{Annotations: map[string]string{"key1": "value1"}, PatchPolicy: v1beta1.SidecarSetMergePatchJsonPatchPolicy},
					{Annotations: map[string]string{"key1": "value1"}, PatchPolicy: v1beta1.SidecarSetOverwritePatchPolicy},
				}
			},
			want:   []want{invalid("spec.patchPodMetadata[1].annotations[key1]")},
			detail: "patch annotation[key1] already exist",
		},
		{
			name: "V14 customVersion without revision",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{CustomVersion: ptr("normal-sidecarset-01234")}
			},
			want:   []want{invalid("spec.injectionStrategy.revision.customVersion")},
			detail: "Cannot find specific ControllerRevision, err: ",
		},
		{
			name: "V15 revisionName not existing",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{
					RevisionName: ptr("test-sidecarset-678235"), Policy: v1beta1.AlwaysSidecarSetInjectRevisionPolicy}
			},
			want: []want{invalid("spec.injectionStrategy.revision.revisionName")},
		},
		{
			name: "V15 counterpart: revisionName existing",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{RevisionName: ptr("test-sidecarset-01234")}
			},
			want: []want{},
		},
		{
			name: "V16 native initContainer with RollingUpdate",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.UpdateStrategy.Type = v1beta1.RollingUpdateSidecarSetStrategyType
				ss.Spec.Containers = nil
				init := sidecar("test-sidecar")
				init.RestartPolicy = &always
				ss.Spec.InitContainers = []v1beta1.SidecarContainer{init}
			},
			want:   []want{required("spec.updateStrategy")},
			detail: "The initContainer in-place upgrade is not currently supported. (spec.initContainers[0], test-sidecar, is a native sidecar: restartPolicy Always; set updateStrategy.type: NotUpdate)",
		},
		{
			name: "V17 resources.limits together with resourcesPolicy",
			mutate: func(ss *v1beta1.SidecarSet) {
				c := &ss.Spec.Containers[0]
				c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("100Mi")}
				c.ResourcesPolicy = &v1beta1.ResourcesPolicy{TargetContainersMode: "sum", ResourcesExpr: cpuLimit("cpu*50%")}
			},
			want:   []want{forbidden("spec.containers[0].resourcesPolicy")},
			detail: "resourcesPolicy and resources cannot be configured together",
		},
		{
			// OpenKruise reports only the empty regex (its CRD schema rejects the mode). Once defaulted
			// the regex is ".*", and sidecarops checks the mode enum itself (no schema offline): still 1.
			name: "V18 invalid targetContainersMode (defaulted)",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Containers[0].ResourcesPolicy = &v1beta1.ResourcesPolicy{TargetContainersMode: "invalid", ResourcesExpr: cpuLimit("cpu*50%")}
			},
			want: []want{notSupported("spec.containers[0].resourcesPolicy.targetContainersMode")},
		},
		{
			// Deviation: raw, sidecarops reports the mode as well as the empty regex.
			name: "V18 invalid targetContainersMode (raw)",
			raw:  true,
			mutate: func(ss *v1beta1.SidecarSet) {
				c := rawSidecar("test-sidecar")
				c.ResourcesPolicy = &v1beta1.ResourcesPolicy{TargetContainersMode: "invalid", ResourcesExpr: cpuLimit("cpu*50%")}
				ss.Spec.Containers = []v1beta1.SidecarContainer{c}
			},
			want: []want{
				notSupported("spec.containers[0].resourcesPolicy.targetContainersMode"),
				required("spec.containers[0].resourcesPolicy.targetContainersNameRegex"),
			},
		},
		{
			name: "V19 resourcesPolicy on a plain initContainer",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.UpdateStrategy = v1beta1.SidecarSetUpdateStrategy{}
				ss.Spec.Containers = nil
				init := sidecar("test-init")
				init.ResourcesPolicy = &v1beta1.ResourcesPolicy{TargetContainersMode: "sum", TargetContainersNameRegex: ".*", ResourcesExpr: cpuLimit("cpu*50%")}
				ss.Spec.InitContainers = []v1beta1.SidecarContainer{init}
			},
			want:   []want{forbidden("spec.initContainers[0].resourcesPolicy")},
			detail: "resourcesPolicy is only supported for containers with RestartPolicy Always",
		},
		{
			name: "V20 resourcesPolicy on a native initContainer with NotUpdate",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Containers = nil
				init := sidecar("test-init")
				init.RestartPolicy = &always
				init.ResourcesPolicy = &v1beta1.ResourcesPolicy{TargetContainersMode: "sum", TargetContainersNameRegex: ".*", ResourcesExpr: cpuLimit("cpu*50%")}
				ss.Spec.InitContainers = []v1beta1.SidecarContainer{init}
			},
			want: []want{},
		},
	})
}

func v9Volumes() []corev1.Volume {
	return []corev1.Volume{
		{Name: "test-volume"},
		{Name: "istio-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr(int32(420)),
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: "istio-ca", ExpirationSeconds: ptr(int64(43200)), Path: "istio-token"}}},
		}}},
	}
}

func pvc(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pvc-0"}}}
}

func cpuLimit(expr string) v1beta1.ResourcesExpr {
	return v1beta1.ResourcesExpr{Limits: &v1beta1.ResourceExprLimits{CPU: expr}}
}

func canary(base string) func(ss *v1beta1.SidecarSet) {
	return func(ss *v1beta1.SidecarSet) {
		ss.Annotations = map[string]string{v1beta1.SidecarSetCanaryAnnotation: "true", v1beta1.SidecarSetBaseAnnotation: base}
	}
}

func named(name string, annotations map[string]string) *v1beta1.SidecarSet {
	ss := base()
	ss.Name = name
	ss.Annotations = annotations
	return ss
}

const baseAnnotationPath = "metadata.annotations[apps.kruise.io/sidecarset-base]"

// TestCanary restates V39–V46 (compat §2 step 2).
func TestCanary(t *testing.T) {
	canaryOf := func(base string) map[string]string {
		return map[string]string{v1beta1.SidecarSetCanaryAnnotation: "true", v1beta1.SidecarSetBaseAnnotation: base}
	}
	run(t, []validCase{
		{name: "V39 not a canary", mutate: func(ss *v1beta1.SidecarSet) { ss.Annotations = map[string]string{} }, want: []want{}},
		{
			name: "canary annotation without base is not a canary",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Annotations = map[string]string{v1beta1.SidecarSetCanaryAnnotation: "true"}
			},
			want: []want{},
		},
		{
			name:   "V40 base is itself",
			mutate: canary("test-sidecarset"),
			others: []*v1beta1.SidecarSet{named("test-sidecarset", nil)},
			want:   []want{invalid(baseAnnotationPath)},
			detail: "base sidecarSet cannot be itself",
		},
		{
			name:   "V41 existing non-canary base, NotUpdate",
			mutate: canary("base-sidecarset"),
			others: []*v1beta1.SidecarSet{named("base-sidecarset", nil)},
			want:   []want{},
		},
		{
			name:   "V42 base is a canary",
			mutate: canary("base1-sidecarset"),
			others: []*v1beta1.SidecarSet{named("base1-sidecarset", canaryOf("other-base-sidecarset"))},
			want:   []want{invalid(baseAnnotationPath)},
			detail: "base sidecarSet cannot be canary",
		},
		{
			name:   "V43 base missing",
			mutate: canary("nonexistent-sidecarset"),
			want:   []want{invalid(baseAnnotationPath)},
			detail: `fetch base sidecarSet[nonexistent-sidecarset] failed: sidecarsets.apps.kruise.io "nonexistent-sidecarset" not found`,
		},
		{
			name:   "V44 update, base unchanged",
			mutate: canary("base-sidecarset"),
			old:    func() *v1beta1.SidecarSet { return named("test-sidecarset", canaryOf("base-sidecarset")) },
			others: []*v1beta1.SidecarSet{named("base-sidecarset", nil)},
			want:   []want{},
		},
		{
			name:   "V45 update, base changed",
			mutate: canary("new-base-sidecarset"),
			old:    func() *v1beta1.SidecarSet { return named("test-sidecarset", canaryOf("old-base-sidecarset")) },
			others: []*v1beta1.SidecarSet{named("new-base-sidecarset", nil), named("old-base-sidecarset", nil)},
			want:   []want{invalid(baseAnnotationPath)},
			detail: "annotations[apps.kruise.io/sidecarset-base] is immutable",
		},
		{
			name:   "update making an existing SidecarSet a canary",
			mutate: canary("base-sidecarset"),
			old:    func() *v1beta1.SidecarSet { return named("test-sidecarset", nil) },
			others: []*v1beta1.SidecarSet{named("base-sidecarset", nil)},
			want:   []want{},
		},
		{
			name: "V46 canary with RollingUpdate",
			mutate: func(ss *v1beta1.SidecarSet) {
				canary("base-sidecarset")(ss)
				ss.Spec.UpdateStrategy.Type = v1beta1.RollingUpdateSidecarSetStrategyType
			},
			others: []*v1beta1.SidecarSet{named("base-sidecarset", nil)},
			want:   []want{invalid("spec.updateStrategy.type")},
			detail: "RollingUpdate is not supported for canary sidecarSet",
		},
		{
			// An empty type is defaulted to RollingUpdate, hence refused too.
			name:   "canary with default update strategy",
			mutate: func(ss *v1beta1.SidecarSet) { canary("base-sidecarset")(ss); ss.Spec.UpdateStrategy.Type = "" },
			others: []*v1beta1.SidecarSet{named("base-sidecarset", nil)},
			want:   []want{invalid("spec.updateStrategy.type")},
		},
	})
}

// TestUpdate covers the UPDATE-only rules (compat §2 step 4, V47).
func TestUpdate(t *testing.T) {
	withUpgrade := func(names ...string) func() *v1beta1.SidecarSet {
		return func() *v1beta1.SidecarSet {
			ss := base()
			ss.Spec.Containers = nil
			for _, n := range names {
				ss.Spec.Containers = append(ss.Spec.Containers, sidecar(n))
			}
			return ss
		}
	}
	run(t, []validCase{
		{
			name: "V47 upgradeType changed",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Containers = []v1beta1.SidecarContainer{sidecar("test")}
				ss.Spec.Containers[0].UpgradeStrategy = v1beta1.SidecarContainerUpgradeStrategy{
					UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "empty:1"}
			},
			old:    withUpgrade("test"),
			want:   []want{invalid("spec.containers[0].upgradeStrategy.upgradeType")},
			detail: "container test upgradeType is immutable",
		},
		{
			name: "old upgradeType empty: may be set",
			raw:  true,
			mutate: func(ss *v1beta1.SidecarSet) {
				c := rawSidecar("test")
				c.UpgradeStrategy.UpgradeType = v1beta1.SidecarContainerHotUpgrade
				ss.Spec.Containers = []v1beta1.SidecarContainer{c}
			},
			old:  withUpgrade("test"),
			want: []want{},
		},
		{
			name:   "container added",
			mutate: func(ss *v1beta1.SidecarSet) { ss.Spec.Containers = append(ss.Spec.Containers, sidecar("new-one")) },
			old:    withUpgrade("test-sidecar"),
			want:   []want{invalid("spec.containers[1].name")},
			detail: "container new-one is not found",
		},
		{
			name:   "container renamed",
			mutate: func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].Name = "renamed" },
			old:    withUpgrade("test-sidecar"),
			want:   []want{invalid("spec.containers[0].name")},
		},
		{
			name:   "container removed",
			mutate: func(ss *v1beta1.SidecarSet) { ss.Spec.Containers = ss.Spec.Containers[:1] },
			old:    withUpgrade("test-sidecar", "gone"),
			want:   []want{},
		},
		{
			name:   "initContainer added",
			mutate: func(ss *v1beta1.SidecarSet) { ss.Spec.InitContainers = []v1beta1.SidecarContainer{sidecar("init")} },
			old:    withUpgrade("test-sidecar"),
			want:   []want{},
		},
	})
}

func TestMetadata(t *testing.T) {
	run(t, []validCase{
		{
			name:   "name with characters OpenKruise refuses",
			mutate: func(ss *v1beta1.SidecarSet) { ss.Name = "bad_name" },
			want:   []want{invalid("metadata.name")},
			detail: "sidecarset name must consist of alphanumeric characters or '-'",
		},
		{
			name:   "upper case is accepted, as OpenKruise does",
			mutate: func(ss *v1beta1.SidecarSet) { ss.Name = "Upper-Case" },
			want:   []want{},
		},
		{
			name:   "name longer than 63",
			mutate: func(ss *v1beta1.SidecarSet) { ss.Name = strings.Repeat("a", 64) },
			want:   []want{invalid("metadata.name")},
		},
		{name: "name missing", mutate: func(ss *v1beta1.SidecarSet) { ss.Name = "" }, want: []want{required("metadata.name")}},
		{
			name:   "cluster-scoped: no namespace",
			mutate: func(ss *v1beta1.SidecarSet) { ss.Namespace = "default" },
			want:   []want{forbidden("metadata.namespace")},
		},
		{
			name:   "invalid label",
			mutate: func(ss *v1beta1.SidecarSet) { ss.Labels = map[string]string{"a": "-bad-"} },
			want:   []want{invalid("metadata.labels")},
		},
	})
}

func TestStrategies(t *testing.T) {
	rolling := func(f func(s *v1beta1.SidecarSetUpdateStrategy)) func(ss *v1beta1.SidecarSet) {
		return func(ss *v1beta1.SidecarSet) {
			ss.Spec.UpdateStrategy.Type = v1beta1.RollingUpdateSidecarSetStrategyType
			f(&ss.Spec.UpdateStrategy)
		}
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
	run(t, []validCase{
		{
			name: "partition percentage with selector",
			mutate: rolling(func(s *v1beta1.SidecarSetUpdateStrategy) {
				s.Partition, s.Selector = ptr(intstr.FromString("10%")), sel
			}),
			want:   []want{invalid("spec.updateStrategy.partition")},
			detail: "Partition and Selector cannot be used together",
		},
		{
			name: "partition 0% with selector is still a set partition (quirk Q15)",
			mutate: rolling(func(s *v1beta1.SidecarSetUpdateStrategy) {
				s.Partition, s.Selector = ptr(intstr.FromString("0%")), sel
			}),
			want: []want{invalid("spec.updateStrategy.partition")},
		},
		{
			name:   "partition int 0 (the default) with selector",
			mutate: rolling(func(s *v1beta1.SidecarSetUpdateStrategy) { s.Selector = sel }),
			want:   []want{},
		},
		{
			name: "NotUpdate: strategy not checked",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.UpdateStrategy.Partition = ptr(intstr.FromString("abc"))
				ss.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{}
			},
			want: []want{},
		},
		{
			name:   "empty update selector",
			mutate: rolling(func(s *v1beta1.SidecarSetUpdateStrategy) { s.Selector = &metav1.LabelSelector{} }),
			want:   []want{invalid("spec.updateStrategy.selector")},
			detail: "empty selector is not valid for sidecarset.",
		},
		{
			name: "partition and maxUnavailable must be non-negative ints or percentages",
			mutate: rolling(func(s *v1beta1.SidecarSetUpdateStrategy) {
				s.Partition, s.MaxUnavailable = ptr(intstr.FromString("ten")), ptr(intstr.FromInt32(-1))
			}),
			want: []want{invalid("spec.updateStrategy.partition"), invalid("spec.updateStrategy.maxUnavailable")},
		},
		{
			name: "weight and order priorities together",
			mutate: rolling(func(s *v1beta1.SidecarSetUpdateStrategy) {
				s.PriorityStrategy = &v1beta1.UpdatePriorityStrategy{
					WeightPriority: []v1beta1.UpdatePriorityWeightTerm{{Weight: 10, MatchSelector: *sel}},
					OrderPriority:  []v1beta1.UpdatePriorityOrderTerm{{OrderedKey: "k"}},
				}
			}),
			want:   []want{required("spec.updateStrategy.priorityStrategy")},
			detail: "only one of weightPriority and orderPriority can be used",
		},
		{
			name: "weight out of range",
			mutate: rolling(func(s *v1beta1.SidecarSetUpdateStrategy) {
				s.PriorityStrategy = &v1beta1.UpdatePriorityStrategy{WeightPriority: []v1beta1.UpdatePriorityWeightTerm{
					{Weight: 0, MatchSelector: *sel}, {Weight: 101, MatchSelector: *sel}}}
			}),
			want:   []want{required("spec.updateStrategy.priorityStrategy.weightPriority[1].weight")},
			detail: "weight must be valid number in the range 1-100",
		},
		{
			name: "weight with empty selector",
			mutate: rolling(func(s *v1beta1.SidecarSetUpdateStrategy) {
				s.PriorityStrategy = &v1beta1.UpdatePriorityStrategy{WeightPriority: []v1beta1.UpdatePriorityWeightTerm{{Weight: 5}}}
			}),
			want: []want{required("spec.updateStrategy.priorityStrategy.weightPriority[0].matchSelector")},
		},
		{
			name: "empty orderedKey",
			mutate: rolling(func(s *v1beta1.SidecarSetUpdateStrategy) {
				s.PriorityStrategy = &v1beta1.UpdatePriorityStrategy{OrderPriority: []v1beta1.UpdatePriorityOrderTerm{{}}}
			}),
			want: []want{required("spec.updateStrategy.priorityStrategy.orderPriority[0].orderedKey")},
		},
		{
			name: "scatter term without key",
			mutate: rolling(func(s *v1beta1.SidecarSetUpdateStrategy) {
				s.ScatterStrategy = v1beta1.UpdateScatterStrategy{{Value: "v"}}
			}),
			want: []want{required("spec.updateStrategy.scatterStrategy[0].key")},
		},
		{
			name: "revision with neither name nor custom version",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{}
			},
			want:   []want{invalid("spec.injectionStrategy.revision")},
			detail: "revisionName and customVersion cannot be empty simultaneously",
		},
		{
			name: "revision policy unknown",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{RevisionName: ptr("test-sidecarset-56789"), Policy: "Sometimes"}
			},
			want:   []want{invalid("spec.injectionStrategy.revision.policy")},
			detail: "Invalid policy Sometimes, supported: [Always, Partial]",
		},
		{
			name:   "empty selector",
			mutate: func(ss *v1beta1.SidecarSet) { ss.Spec.Selector = &metav1.LabelSelector{} },
			want:   []want{invalid("spec.selector")},
		},
		{
			name:   "empty namespaceSelector",
			mutate: func(ss *v1beta1.SidecarSet) { ss.Spec.NamespaceSelector = &metav1.LabelSelector{} },
			want:   []want{invalid("spec.namespaceSelector")},
		},
		{
			// v1alpha1 spec.namespace replaces namespaceSelector in OpenKruise's conversion.
			// A v1alpha1 spec.namespace arrives converted; its edge names these errors spec.namespace.
			name:   "a namespace name that cannot be a label value",
			mutate: func(ss *v1beta1.SidecarSet) { ss.Spec.NamespaceSelector = v1beta1.NamespaceNamed("not a namespace") },
			want:   []want{invalid("spec.namespaceSelector.matchLabels"), invalid("spec.namespaceSelector")},
		},
	})
}

func TestRevisionsNil(t *testing.T) {
	ss := base()
	ss.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{RevisionName: ptr("test-sidecarset-01234")}
	defaults.SidecarSet(ss)
	errs := SidecarSet(ss, nil, nil, nil)
	assert.Equal(t, []want{invalid("spec.injectionStrategy.revision.revisionName")}, got(errs))
}

func TestSidecarFields(t *testing.T) {
	fieldRef := func(apiVersion, path string) func(ss *v1beta1.SidecarSet) {
		return func(ss *v1beta1.SidecarSet) {
			ss.Spec.Containers[0].TransferEnv = []v1beta1.TransferEnvVar{
				{SourceContainerName: "main", EnvName: "A"},
				{SourceContainerNameFrom: &v1beta1.SourceContainerNameSource{
					FieldRef: &corev1.ObjectFieldSelector{APIVersion: apiVersion, FieldPath: path}}, EnvName: "B"},
			}
		}
	}
	const fieldPath = "spec.containers[0].transferEnv[1].sourceContainerNameFrom.fieldRef.fieldPath"
	run(t, []validCase{
		{
			name:   "unsupported podInjectPolicy",
			mutate: func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].PodInjectPolicy = "Middle" },
			want:   []want{invalid("spec.containers[0].podInjectPolicy")},
			detail: "unsupported pod inject policy",
		},
		{
			name: "initContainers are not checked for podInjectPolicy",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.InitContainers = []v1beta1.SidecarContainer{sidecar("init")}
				ss.Spec.InitContainers[0].PodInjectPolicy = "Middle"
			},
			want: []want{},
		},
		{name: "transferEnv from a label", mutate: fieldRef("", "metadata.labels['app']"), want: []want{}},
		{name: "transferEnv from an annotation", mutate: fieldRef("v1", "metadata.annotations['App.Name']"), want: []want{}},
		{
			name: "transferEnv from metadata.name (S11)", mutate: fieldRef("v1", "metadata.name"),
			want: []want{invalid(fieldPath)}, detail: "error converting fieldPath: field label not supported: metadata.name",
		},
		{
			name: "transferEnv from metadata.labels without key", mutate: fieldRef("v1", "metadata.labels"),
			want: []want{invalid(fieldPath)},
		},
		{
			name: "transferEnv from another subscripted path", mutate: fieldRef("v1", "spec.containers['x']"),
			want: []want{invalid(fieldPath)}, detail: "field path not supported: spec.containers",
		},
		{
			name: "transferEnv apiVersion v2", mutate: fieldRef("v2", "metadata.labels['app']"),
			want: []want{invalid(fieldPath)}, detail: "unsupported pod version: v2",
		},
		{
			name: "transferEnv invalid label key", mutate: fieldRef("v1", "metadata.labels['-bad']"),
			want: []want{invalid(fieldPath)},
		},
		{
			name: "transferEnv apiVersion missing (raw)", raw: true,
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Containers = []v1beta1.SidecarContainer{rawSidecar("test-sidecar")}
				fieldRef("", "metadata.labels['app']")(ss)
			},
			want: []want{required("spec.containers[0].transferEnv[1].sourceContainerNameFrom.fieldRef.apiVersion")},
		},
		{
			name:   "patch without annotations",
			mutate: func(ss *v1beta1.SidecarSet) { ss.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{}} },
			want:   []want{required("spec.patchPodMetadata[0].annotations")},
			detail: "no annotations defined for SidecarSet",
		},
		{
			name: "patch with an invalid key",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"not a key": "v"}}}
			},
			want: []want{invalid("spec.patchPodMetadata[0].annotations")},
		},
		{
			name: "patch too large",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"k": strings.Repeat("x", 256*1024)}}}
			},
			want: []want{{"FieldValueTooLong", "spec.patchPodMetadata[0].annotations"}},
		},
		{
			name: "patch without policy (raw)", raw: true,
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.Containers = []v1beta1.SidecarContainer{rawSidecar("test-sidecar")}
				ss.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"k": "v"}}}
			},
			want:   []want{required("spec.patchPodMetadata[0].patchPolicy")},
			detail: "no patchPolicy defined for patchPodMetadata",
		},
		{
			name: "same key in one patch and twice more",
			mutate: func(ss *v1beta1.SidecarSet) {
				ss.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{
					{Annotations: map[string]string{"a": "1", "b": "1"}},
					{Annotations: map[string]string{"b": "2"}},
					{Annotations: map[string]string{"a": "3", "c": "3"}},
				}
			},
			want: []want{invalid("spec.patchPodMetadata[1].annotations[b]"), invalid("spec.patchPodMetadata[2].annotations[a]")},
		},
	})
}

func TestNil(t *testing.T) {
	assert.NotPanics(t, func() {
		errs := SidecarSet(nil, nil, nil, nil)
		assert.Len(t, errs, 1)
	})
}
