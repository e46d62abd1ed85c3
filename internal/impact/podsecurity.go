package impact

import (
	"fmt"
	"slices"

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
