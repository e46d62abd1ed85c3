package validation

import (
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/sidecarset/resourcespolicy"
)

var targetContainersModes = []v1beta1.TargetContainersModeType{v1beta1.TargetContainersModeSum, v1beta1.TargetContainersModeMax}

// validateResourcesPolicy is compat §2 step 11 for one (init)container at fldPath.
func validateResourcesPolicy(c *v1beta1.SidecarContainer, fldPath *field.Path) field.ErrorList {
	policy := c.ResourcesPolicy
	if policy == nil {
		return nil
	}
	p := fldPath.Child("resourcesPolicy")
	// The computed resources replace the container's, so fixed ones would be silently lost.
	if len(c.Resources.Limits) > 0 || len(c.Resources.Requests) > 0 {
		return field.ErrorList{field.Forbidden(p, "resourcesPolicy and resources cannot be configured together")}
	}
	var allErrs field.ErrorList
	// The mode enum is enforced by OpenKruise's CRD schema; offline there is no schema to do it.
	switch policy.TargetContainersMode {
	case v1beta1.TargetContainersModeSum, v1beta1.TargetContainersModeMax:
	case "":
		allErrs = append(allErrs, field.Required(p.Child("targetContainersMode"), ""))
	default:
		allErrs = append(allErrs, field.NotSupported(p.Child("targetContainersMode"), policy.TargetContainersMode, targetContainersModes))
	}
	regexPath := p.Child("targetContainersNameRegex")
	if policy.TargetContainersNameRegex == "" {
		allErrs = append(allErrs, field.Required(regexPath, "invalid empty regex"))
	} else if _, err := regexp.Compile(policy.TargetContainersNameRegex); err != nil {
		allErrs = append(allErrs, field.Invalid(regexPath, policy.TargetContainersNameRegex, fmt.Sprintf("invalid regex pattern: %v", err)))
	}
	expr := policy.ResourcesExpr
	exprPath := p.Child("resourcesExpr")
	if expr.Limits == nil && expr.Requests == nil {
		allErrs = append(allErrs, field.Required(exprPath, "at least one of limits or requests must be configured"))
		return allErrs
	}
	if l := expr.Limits; l != nil {
		allErrs = append(allErrs, validateExpr(l.CPU, "cpu", exprPath.Child("limits", "cpu"))...)
		allErrs = append(allErrs, validateExpr(l.Memory, "memory", exprPath.Child("limits", "memory"))...)
	}
	if r := expr.Requests; r != nil {
		allErrs = append(allErrs, validateExpr(r.CPU, "cpu", exprPath.Child("requests", "cpu"))...)
		allErrs = append(allErrs, validateExpr(r.Memory, "memory", exprPath.Child("requests", "memory"))...)
	}
	return allErrs
}

func validateExpr(expr, variable string, fldPath *field.Path) field.ErrorList {
	if err := resourcespolicy.ValidateExpr(expr, variable); err != nil {
		return field.ErrorList{field.Invalid(fldPath, expr, fmt.Sprintf("invalid expression: %v", err))}
	}
	return nil
}
