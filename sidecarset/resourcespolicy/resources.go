package resourcespolicy

import (
	"fmt"
	"math/big"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// ValidateExpr reports whether expr is an acceptable resourcesPolicy expression for variable
// ("cpu" or "memory"), with OpenKruise's verdicts: the empty expression is valid (it means
// "unlimited" for a limit and "not set" for a request); otherwise the expression must parse and
// evaluate without error, and to a non-negative value, with the variable bound to the unitless
// number 1. That binding is OpenKruise's, and it is why "cpu*cpu" is accepted here although it can
// never be evaluated against a real pod, and why "cpu - 2" is rejected.
func ValidateExpr(expr, variable string) error {
	if expr == "" {
		return nil
	}
	e, err := Parse(expr, variable)
	if err != nil {
		return err
	}
	_, err = e.evalWith(value{r: big.NewRat(1, 1)})
	return err
}

// Compute returns the resources that replace sidecar container c's when it is injected into pod
// (compat §1.19). Target containers are pod's native sidecars (initContainers with restartPolicy
// Always) followed by its containers, minus those named in excludeNames (the (init)container names
// of every SidecarSet matched to the pod), filtered by c's targetContainersNameRegex. Their
// resources are aggregated (sum or max) and fed to the expressions:
//
//   - a limit is set only when its expression is non-empty and every target has that limit (one
//     unlimited target makes the aggregate unlimited);
//   - a request is set when its expression is non-empty; a target without the request counts as 0;
//   - Limits / Requests are nil when nothing is set in them.
//
// Without a resourcesPolicy c's own resources are returned (a copy).
func Compute(pod *corev1.Pod, c *v1beta1.SidecarContainer, excludeNames map[string]bool) (corev1.ResourceRequirements, error) {
	if c == nil {
		return corev1.ResourceRequirements{}, fmt.Errorf("resourcesPolicy: sidecar container is nil")
	}
	policy := c.ResourcesPolicy
	if policy == nil {
		return *c.Resources.DeepCopy(), nil
	}
	fail := func(format string, args ...any) (corev1.ResourceRequirements, error) {
		return corev1.ResourceRequirements{}, fmt.Errorf("container %q resourcesPolicy: %s", c.Name, fmt.Sprintf(format, args...))
	}
	if pod == nil {
		return fail("pod is nil")
	}
	targets, err := targetContainers(pod, policy.TargetContainersNameRegex, excludeNames)
	if err != nil {
		return fail("%v", err)
	}
	if len(targets) == 0 {
		return fail("no containers match the regex pattern %q", policy.TargetContainersNameRegex)
	}
	limits, requests, err := aggregate(targets, policy.TargetContainersMode)
	if err != nil {
		return fail("%v", err)
	}

	var out corev1.ResourceRequirements
	type item struct {
		field    string
		expr     string
		name     corev1.ResourceName
		agg      corev1.ResourceList
		isLimit  bool
		variable string
	}
	var items []item
	if l := policy.ResourcesExpr.Limits; l != nil {
		items = append(items,
			item{"limits.cpu", l.CPU, corev1.ResourceCPU, limits, true, "cpu"},
			item{"limits.memory", l.Memory, corev1.ResourceMemory, limits, true, "memory"})
	}
	if r := policy.ResourcesExpr.Requests; r != nil {
		items = append(items,
			item{"requests.cpu", r.CPU, corev1.ResourceCPU, requests, false, "cpu"},
			item{"requests.memory", r.Memory, corev1.ResourceMemory, requests, false, "memory"})
	}
	for _, it := range items {
		if it.expr == "" {
			continue
		}
		agg, ok := it.agg[it.name]
		if it.isLimit && !ok {
			continue // some target is unlimited, so the sidecar is too
		}
		e, err := Parse(it.expr, it.variable)
		if err != nil {
			return fail("%s: %v", it.field, err)
		}
		q, err := e.Eval(agg)
		if err != nil {
			return fail("%s: %v", it.field, err)
		}
		dst := &out.Requests
		if it.isLimit {
			dst = &out.Limits
		}
		if *dst == nil {
			*dst = corev1.ResourceList{}
		}
		(*dst)[it.name] = q
	}
	return out, nil
}

func targetContainers(pod *corev1.Pod, nameRegex string, exclude map[string]bool) ([]*corev1.Container, error) {
	re, err := regexp.Compile(nameRegex)
	if err != nil {
		return nil, fmt.Errorf("invalid regex pattern %q: %w", nameRegex, err)
	}
	var out []*corev1.Container
	for i := range pod.Spec.InitContainers {
		ic := &pod.Spec.InitContainers[i]
		if exclude[ic.Name] || ic.RestartPolicy == nil || *ic.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			continue
		}
		if re.MatchString(ic.Name) {
			out = append(out, ic)
		}
	}
	for i := range pod.Spec.Containers {
		ct := &pod.Spec.Containers[i]
		if !exclude[ct.Name] && re.MatchString(ct.Name) {
			out = append(out, ct)
		}
	}
	return out, nil
}

// aggregate mirrors OpenKruise's aggregateResourcesBySum/ByMax, including which quantity's format
// the aggregate inherits (resource.Quantity.Add and "first greatest wins"), because the format
// decides how results print.
func aggregate(cs []*corev1.Container, mode v1beta1.TargetContainersModeType) (limits, requests corev1.ResourceList, err error) {
	limits, requests = corev1.ResourceList{}, corev1.ResourceList{}
	names := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}
	switch mode {
	case v1beta1.TargetContainersModeSum:
		for _, name := range names {
			lim, req := resource.NewQuantity(0, resource.DecimalSI), resource.NewQuantity(0, resource.DecimalSI)
			allLimited := true
			for _, c := range cs {
				if q, ok := c.Resources.Limits[name]; ok {
					lim.Add(q)
				} else {
					allLimited = false
				}
				if q, ok := c.Resources.Requests[name]; ok {
					req.Add(q)
				}
			}
			if allLimited {
				limits[name] = *lim
			}
			if !req.IsZero() {
				requests[name] = *req
			}
		}
	case v1beta1.TargetContainersModeMax:
		for _, name := range names {
			allLimited := true
			for _, c := range cs {
				if q, ok := c.Resources.Limits[name]; ok {
					if cur, seen := limits[name]; !seen || q.Cmp(cur) > 0 {
						limits[name] = q.DeepCopy()
					}
				} else {
					allLimited = false
				}
				if q, ok := c.Resources.Requests[name]; ok {
					if cur, seen := requests[name]; !seen || q.Cmp(cur) > 0 {
						requests[name] = q.DeepCopy()
					}
				}
			}
			if !allLimited {
				delete(limits, name)
			}
		}
	default:
		return nil, nil, fmt.Errorf("unsupported targetContainersMode %q (sum or max)", mode)
	}
	return limits, requests, nil
}
