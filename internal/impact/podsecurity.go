package impact

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// PodSecurity is a namespace's enforced Pod Security level (its pod-security.kubernetes.io/enforce
// labels; privileged when unlabelled) and what a pod fails of it.
type PodSecurity struct {
	Enforce        string `json:"enforce"`
	EnforceVersion string `json:"enforceVersion"`
	// Violations are the failed checks, in Pod Security's own words; none when it passes.
	Violations []Violation `json:"violations,omitempty"`
}

// Violation is one failed Pod Security check.
type Violation struct {
	// Check is the check's reason as Pod Security words it ("privileged", "hostPath volumes"...).
	Check string `json:"check"`
	// Detail names what fails it (containers, volumes, values).
	Detail string `json:"detail,omitempty"`
}

// String is the violation as Pod Security's own refusals word it.
func (v Violation) String() string {
	if v.Detail == "" {
		return v.Check
	}
	return fmt.Sprintf("%s (%s)", v.Check, v.Detail)
}

var evaluator = func() policy.Evaluator {
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		panic(err) // Pod Security's own checks: an error is a broken build of that module
	}
	return e
}()

// Enforced is the level labels enforce, as Pod Security reads them; a label it cannot parse
// leaves its default (privileged, latest), as the admission plugin then does.
func Enforced(labels map[string]string) psaapi.LevelVersion {
	p, _ := psaapi.PolicyToEvaluate(labels, psaapi.Policy{
		Enforce: psaapi.LevelVersion{Level: psaapi.LevelPrivileged, Version: psaapi.LatestVersion()},
	})
	return p.Enforce
}

// Check evaluates a pod against lv with Pod Security's checks.
func Check(lv psaapi.LevelVersion, meta *metav1.ObjectMeta, spec *corev1.PodSpec) []Violation {
	if lv.Level == psaapi.LevelPrivileged {
		return nil
	}
	var out []Violation
	for _, r := range evaluator.EvaluatePod(lv, meta, spec) {
		if !r.Allowed {
			out = append(out, Violation{Check: r.ForbiddenReason, Detail: r.ForbiddenDetail})
		}
	}
	return out
}

// sidecarPod is a pod of a SidecarSet's sidecars alone, with the pod-level settings the restricted
// level asks for: what it fails, the sidecars fail whatever the pods they join set.
type sidecarPod struct {
	meta metav1.ObjectMeta
	spec corev1.PodSpec
	// by level and version: namespaces share a few levels.
	known map[psaapi.LevelVersion][]Violation
}

func newSidecarPod(ss *v1beta1.SidecarSet) *sidecarPod {
	p := &sidecarPod{known: map[psaapi.LevelVersion][]Violation{}}
	for _, c := range ss.Spec.InitContainers {
		p.spec.InitContainers = append(p.spec.InitContainers, c.Container)
	}
	for _, c := range ss.Spec.Containers {
		p.spec.Containers = append(p.spec.Containers, c.Container)
	}
	// Only the volumes the sidecars mount are injected (compat §1.12).
	for _, v := range ss.Spec.Volumes {
		if mounted(p.spec, v.Name) {
			p.spec.Volumes = append(p.spec.Volumes, v)
		}
	}
	p.spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	return p
}

func mounted(spec corev1.PodSpec, volume string) bool {
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, m := range c.VolumeMounts {
			if m.Name == volume {
				return true
			}
		}
		for _, d := range c.VolumeDevices {
			if d.Name == volume {
				return true
			}
		}
	}
	return false
}

func (p *sidecarPod) podSecurity(labels map[string]string) PodSecurity {
	lv := Enforced(labels)
	vs, ok := p.known[lv]
	if !ok {
		vs = Check(lv, &p.meta, &p.spec)
		p.known[lv] = vs
	}
	return PodSecurity{Enforce: string(lv.Level), EnforceVersion: lv.Version.String(), Violations: vs}
}

// PodFinding is what injection did to a pod's standing with its namespace's enforced level: the pod
// passed it before and fails it after.
type PodFinding struct {
	Level psaapi.LevelVersion
	// SidecarSets are those whose sidecars fail the level on their own; all injected ones when
	// only their combination with the pod does.
	SidecarSets []string
	Violations  []Violation
}

// String is the admission warning and Event message.
func (f PodFinding) String() string {
	checks := make([]string, len(f.Violations))
	for i, v := range f.Violations {
		checks[i] = v.String()
	}
	return fmt.Sprintf("sidecarops: injecting SidecarSet %s makes the pod violate PodSecurity %q: %s",
		strings.Join(f.SidecarSets, ", "), f.Level.String(), strings.Join(checks, ", "))
}

// Worsened reports whether injecting injected turned before, which passed the level namespaceLabels
// enforce, into after, which fails it; nil when it did not (the pod failed already, or still
// passes).
func Worsened(namespaceLabels map[string]string, before, after *corev1.Pod, injected []*v1beta1.SidecarSet) *PodFinding {
	lv := Enforced(namespaceLabels)
	if lv.Level == psaapi.LevelPrivileged || len(injected) == 0 {
		return nil
	}
	vs := Check(lv, &after.ObjectMeta, &after.Spec)
	if len(vs) == 0 || len(Check(lv, &before.ObjectMeta, &before.Spec)) > 0 {
		return nil
	}
	f := &PodFinding{Level: lv, Violations: vs}
	for _, ss := range injected {
		if len(newSidecarPod(ss).podSecurity(namespaceLabels).Violations) > 0 {
			f.SidecarSets = append(f.SidecarSets, ss.Name)
		}
	}
	if len(f.SidecarSets) == 0 {
		for _, ss := range injected {
			f.SidecarSets = append(f.SidecarSets, ss.Name)
		}
	}
	return f
}
