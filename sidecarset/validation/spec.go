package validation

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/sidecarset/fieldpath"
	"github.com/sidecarops/sidecarops/sidecarset/history"
)

// validateSpec is OpenKruise's validateSidecarSetSpec (compat §2 step 3, except the whitelist).
func validateSpec(ss *v1beta1.SidecarSet, revs history.Source, fldPath *field.Path) field.ErrorList {
	spec := &ss.Spec
	var allErrs field.ErrorList

	// In-place upgrades only touch pod.spec.containers, so a native sidecar could never be rolled.
	// OpenKruise's message comes first, unchanged; what follows names the container and the fix.
	if spec.UpdateStrategy.Type == v1beta1.RollingUpdateSidecarSetStrategyType {
		for i := range spec.InitContainers {
			if c := &spec.InitContainers[i]; isNativeSidecar(c) {
				allErrs = append(allErrs, field.Required(fldPath.Child("updateStrategy"), fmt.Sprintf(
					"The initContainer in-place upgrade is not currently supported. (%s, %s, is a native sidecar: restartPolicy Always; set updateStrategy.type: NotUpdate)",
					fldPath.Child("initContainers").Index(i), c.Name)))
			}
		}
	}

	if spec.Selector == nil {
		allErrs = append(allErrs, field.Required(fldPath.Child("selector"), "no selector defined for SidecarSet"))
	} else {
		allErrs = append(allErrs, validateSelector(spec.Selector, fldPath.Child("selector"))...)
	}
	allErrs = append(allErrs, validateNamespaceScope(spec, fldPath)...)
	allErrs = append(allErrs, validateInjectionStrategy(ss, revs, fldPath.Child("injectionStrategy"))...)
	allErrs = append(allErrs, validateUpdateStrategy(&spec.UpdateStrategy, fldPath.Child("updateStrategy"))...)

	if len(spec.InitContainers) == 0 && len(spec.Containers) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("containers"), "no initContainer or container defined for SidecarSet"))
	} else {
		allErrs = append(allErrs, validateSidecarContainers(spec, fldPath)...)
	}
	allErrs = append(allErrs, validatePatchPodMetadata(spec.PatchPodMetadata, fldPath.Child("patchPodMetadata"))...)
	// The ControllerRevision's label, and in v1alpha1 the SidecarSet's own: the API server
	// refuses the revision, and every v1alpha1 read of the SidecarSet, when it is no label value.
	for _, msg := range validation.IsValidLabelValue(spec.CustomVersion) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("customVersion"), spec.CustomVersion, msg))
	}
	return allErrs
}

func isNativeSidecar(c *v1beta1.SidecarContainer) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// validateSelector is OpenKruise's: no empty selector (it would select nothing, or — as a
// namespace selector — everything by accident), and validateSelectorSyntax. An empty selector has
// no syntax to get wrong, so the two never report on one selector together.
func validateSelector(sel *metav1.LabelSelector, fldPath *field.Path) field.ErrorList {
	if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		return field.ErrorList{field.Invalid(fldPath, selectorString(sel), "empty selector is not valid for sidecarset.")}
	}
	return validateSelectorSyntax(sel, fldPath)
}

// validateSelectorSyntax is Kubernetes' label-selector rules and a selector that converts. The
// conversion error repeats a syntax error already reported; OpenKruise reports both, and so do
// we, at the selector itself.
func validateSelectorSyntax(sel *metav1.LabelSelector, fldPath *field.Path) field.ErrorList {
	allErrs := metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, fldPath)
	if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
		allErrs = append(allErrs, field.Invalid(fldPath, selectorString(sel), err.Error()))
	}
	return allErrs
}

// selectorString shows a selector in label-query syntax, or as the JSON the user wrote when it has
// none (an invalid selector cannot be formatted as a query).
func selectorString(sel *metav1.LabelSelector) string {
	if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
		raw, _ := json.Marshal(sel)
		return string(raw)
	}
	return metav1.FormatLabelSelector(sel)
}

// validateNamespaceScope checks the namespaceSelector, which a v1alpha1 spec.namespace has been
// converted into (its label value checked here; the v1alpha1 edge names the error spec.namespace).
func validateNamespaceScope(spec *v1beta1.SidecarSetSpec, fldPath *field.Path) field.ErrorList {
	if spec.NamespaceSelector != nil {
		return validateSelector(spec.NamespaceSelector, fldPath.Child("namespaceSelector"))
	}
	return nil
}

// validateInjectionStrategy requires that a configured revision exists now, as OpenKruise does:
// otherwise every pod creation would be denied later (compat §1.5 step 2).
func validateInjectionStrategy(ss *v1beta1.SidecarSet, revs history.Source, fldPath *field.Path) field.ErrorList {
	rev := ss.Spec.InjectionStrategy.Revision
	if rev == nil {
		return nil
	}
	revPath := fldPath.Child("revision")
	var allErrs field.ErrorList
	switch {
	case rev.RevisionName == nil && rev.CustomVersion == nil:
		allErrs = append(allErrs, field.Invalid(revPath, "", "revisionName and customVersion cannot be empty simultaneously"))
	default:
		// revisionName wins over customVersion, so the error names the field that was used.
		p, v := revPath.Child("customVersion"), ""
		if rev.CustomVersion != nil {
			v = *rev.CustomVersion
		}
		if rev.RevisionName != nil {
			p, v = revPath.Child("revisionName"), *rev.RevisionName
		}
		cr, err := history.Find(ss, revs)
		if err == nil && cr == nil {
			err = fmt.Errorf("no ControllerRevision found")
		}
		if err != nil {
			allErrs = append(allErrs, field.Invalid(p, v, fmt.Sprintf("Cannot find specific ControllerRevision, err: %v", err)))
		}
	}
	switch rev.Policy {
	case "", v1beta1.AlwaysSidecarSetInjectRevisionPolicy, v1beta1.PartialSidecarSetInjectRevisionPolicy:
	default:
		allErrs = append(allErrs, field.Invalid(revPath.Child("policy"), rev.Policy, fmt.Sprintf("Invalid policy %v, supported: [%s, %s]",
			rev.Policy, v1beta1.AlwaysSidecarSetInjectRevisionPolicy, v1beta1.PartialSidecarSetInjectRevisionPolicy)))
	}
	return allErrs
}

// validateUpdateStrategy checks the strategy only for RollingUpdate, as OpenKruise does: a
// NotUpdate SidecarSet never reads it.
func validateUpdateStrategy(s *v1beta1.SidecarSetUpdateStrategy, fldPath *field.Path) field.ErrorList {
	if s.Type != v1beta1.RollingUpdateSidecarSetStrategyType {
		return nil
	}
	var allErrs field.ErrorList
	// A "set" partition is any percentage (even "0%") or a non-zero integer (quirk Q15).
	if partitionIsSet(s.Partition) && s.Selector != nil {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("partition"), s.Partition.String(), "Partition and Selector cannot be used together"))
	}
	if s.Selector != nil {
		allErrs = append(allErrs, validateSelector(s.Selector, fldPath.Child("selector"))...)
	}
	if s.Partition != nil {
		allErrs = append(allErrs, validatePositiveIntOrPercent(*s.Partition, fldPath.Child("partition"))...)
	}
	if s.MaxUnavailable != nil {
		allErrs = append(allErrs, validatePositiveIntOrPercent(*s.MaxUnavailable, fldPath.Child("maxUnavailable"))...)
	}
	if err := validatePriorityStrategy(s.PriorityStrategy, fldPath.Child("priorityStrategy")); err != nil {
		allErrs = append(allErrs, err)
	}
	if err := validateScatterStrategy(s.ScatterStrategy, fldPath.Child("scatterStrategy")); err != nil {
		allErrs = append(allErrs, err)
	}
	return allErrs
}

func partitionIsSet(p *intstr.IntOrString) bool {
	return p != nil && (p.Type == intstr.String || p.IntVal != 0)
}

// validatePositiveIntOrPercent is Kubernetes' apps ValidatePositiveIntOrPercent.
func validatePositiveIntOrPercent(v intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	switch v.Type {
	case intstr.String:
		var allErrs field.ErrorList
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			allErrs = append(allErrs, field.Invalid(fldPath, v.StrVal, msg))
		}
		return allErrs
	case intstr.Int:
		return apivalidation.ValidateNonnegativeField(int64(v.IntVal), fldPath)
	default:
		return field.ErrorList{field.Invalid(fldPath, v.String(), "must be an integer or percentage (e.g '5%')")}
	}
}

// validatePriorityStrategy is OpenKruise's UpdatePriorityStrategy.FieldsValidation: the first
// problem only, as a Required error, with the weight range quirk (0 is accepted although the
// message says 1-100, quirk Q14). The path points at the offending term.
func validatePriorityStrategy(s *v1beta1.UpdatePriorityStrategy, fldPath *field.Path) *field.Error {
	if s == nil {
		return nil
	}
	if len(s.WeightPriority) > 0 && len(s.OrderPriority) > 0 {
		return field.Required(fldPath, "only one of weightPriority and orderPriority can be used")
	}
	for i := range s.WeightPriority {
		w := &s.WeightPriority[i]
		p := fldPath.Child("weightPriority").Index(i)
		if w.Weight < 0 || w.Weight > 100 {
			return field.Required(p.Child("weight"), "weight must be valid number in the range 1-100")
		}
		if len(w.MatchSelector.MatchLabels)+len(w.MatchSelector.MatchExpressions) == 0 {
			return field.Required(p.Child("matchSelector"), "selector can not be empty")
		}
		if _, err := metav1.LabelSelectorAsSelector(&w.MatchSelector); err != nil {
			return field.Required(p.Child("matchSelector"), fmt.Sprintf("invalid selector %v", err))
		}
	}
	for i := range s.OrderPriority {
		if s.OrderPriority[i].OrderedKey == "" {
			return field.Required(fldPath.Child("orderPriority").Index(i).Child("orderedKey"), "order key can not be empty")
		}
	}
	return nil
}

// validateScatterStrategy is OpenKruise's UpdateScatterStrategy.FieldsValidation (first problem
// only, as a Required error).
func validateScatterStrategy(s v1beta1.UpdateScatterStrategy, fldPath *field.Path) *field.Error {
	seen := make(map[v1beta1.UpdateScatterTerm]bool, len(s))
	for i, term := range s {
		if term.Key == "" {
			return field.Required(fldPath.Index(i).Child("key"), "key should not be empty")
		}
		if seen[term] {
			return field.Required(fldPath.Index(i), fmt.Sprintf("duplicated key=%v value=%v", term.Key, term.Value))
		}
		seen[term] = true
	}
	return nil
}

// validateSidecarContainers covers compat §2 steps 8–11: the sidecar-only fields, then the containers
// and volumes as Kubernetes would validate them in a pod.
func validateSidecarContainers(spec *v1beta1.SidecarSetSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		p := fldPath.Child("initContainers").Index(i)
		if c.ResourcesPolicy != nil && !isNativeSidecar(c) {
			allErrs = append(allErrs, field.Forbidden(p.Child("resourcesPolicy"),
				"resourcesPolicy is only supported for containers with RestartPolicy Always"))
		}
		allErrs = append(allErrs, validateResourcesPolicy(c, p)...)
	}
	// OpenKruise checks these fields on containers only; initContainers are placed and never
	// upgraded or given shared volumes the same way.
	for i := range spec.Containers {
		c := &spec.Containers[i]
		p := fldPath.Child("containers").Index(i)
		if c.PodInjectPolicy != v1beta1.BeforeAppContainerType && c.PodInjectPolicy != v1beta1.AfterAppContainerType {
			allErrs = append(allErrs, field.Invalid(p.Child("podInjectPolicy"), c.PodInjectPolicy, "unsupported pod inject policy"))
		}
		if t := c.ShareVolumePolicy.Type; t != v1beta1.ShareVolumePolicyEnabled && t != v1beta1.ShareVolumePolicyDisabled {
			allErrs = append(allErrs, field.Invalid(p.Child("shareVolumePolicy", "type"), t, "unsupported share volume policy"))
		}
		allErrs = append(allErrs, validateTransferEnv(c.TransferEnv, p.Child("transferEnv"))...)
		allErrs = append(allErrs, validateResourcesPolicy(c, p)...)
	}
	allErrs = append(allErrs, validatePodLevel(spec, fldPath)...)
	allErrs = append(allErrs, validateTwinNames(spec, fldPath)...)
	return allErrs
}

// validateTwinNames checks the names a HotUpgrade sidecar runs under in pods, <name>-1 and
// <name>-2 (compat §1.20): they become container names and the name part of its version
// annotations' keys, so each must be a container name and no other sidecar's of this SidecarSet,
// or every pod the SidecarSet injects is refused by the API server. An invalid name itself is
// the pod-level rules' to report.
func validateTwinNames(spec *v1beta1.SidecarSetSpec, fldPath *field.Path) field.ErrorList {
	names := map[string]bool{}
	for i := range spec.InitContainers {
		names[spec.InitContainers[i].Name] = true
	}
	for i := range spec.Containers {
		names[spec.Containers[i].Name] = true
	}
	var allErrs field.ErrorList
	check := func(c *v1beta1.SidecarContainer, p *field.Path) {
		if c.UpgradeStrategy.UpgradeType != v1beta1.SidecarContainerHotUpgrade || len(content.IsDNS1123Label(c.Name)) > 0 {
			return
		}
		twins := []string{c.Name + "-1", c.Name + "-2"}
		why := func(msg string) string {
			return fmt.Sprintf("a HotUpgrade sidecar runs in pods as %s and %s: %s", twins[0], twins[1], msg)
		}
		// Both twins are as long: one says it for the two.
		for _, msg := range content.IsDNS1123Label(twins[0]) {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), c.Name, why(msg)))
		}
		for _, twin := range twins {
			if names[twin] {
				allErrs = append(allErrs, field.Invalid(p.Child("name"), c.Name, why(twin+" is another sidecar of this SidecarSet")))
			}
		}
	}
	for i := range spec.InitContainers {
		// Only a native sidecar is injected as twins; a plain initContainer runs once, as itself.
		if c := &spec.InitContainers[i]; isNativeSidecar(c) {
			check(c, fldPath.Child("initContainers").Index(i))
		}
	}
	for i := range spec.Containers {
		check(&spec.Containers[i], fldPath.Child("containers").Index(i))
	}
	return allErrs
}

// validateTransferEnv checks sourceContainerNameFrom.fieldRef the way OpenKruise does: only
// apiVersion v1 and only subscripted metadata.labels['k'] / metadata.annotations['k'], because the
// value is read from the pod at injection time and must name a single key.
func validateTransferEnv(envs []v1beta1.TransferEnvVar, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i := range envs {
		from := envs[i].SourceContainerNameFrom
		if from == nil || from.FieldRef == nil {
			continue
		}
		allErrs = append(allErrs, validateSourceFieldRef(from.FieldRef, fldPath.Index(i).Child("sourceContainerNameFrom", "fieldRef"))...)
	}
	return allErrs
}

func validateSourceFieldRef(fs *corev1.ObjectFieldSelector, fldPath *field.Path) field.ErrorList {
	if errs := validateFieldRefRequired(fs, fldPath); len(errs) > 0 {
		return errs
	}
	pathPath := fldPath.Child("fieldPath")
	if err := convertDownwardAPIFieldLabel(fs.APIVersion, fs.FieldPath); err != nil {
		return field.ErrorList{field.Invalid(pathPath, fs.FieldPath, fmt.Sprintf("error converting fieldPath: %v", err))}
	}
	// convertDownwardAPIFieldLabel only accepts these two subscripted paths.
	path, subscript, _ := fieldpath.SplitMaybeSubscripted(fs.FieldPath)
	key := subscript
	if path == "metadata.annotations" {
		// Annotation keys are case-insensitive for validation, as in Kubernetes.
		key = strings.ToLower(subscript)
	}
	var allErrs field.ErrorList
	for _, msg := range content.IsLabelKey(key) {
		allErrs = append(allErrs, field.Invalid(pathPath, subscript, msg))
	}
	return allErrs
}

// convertDownwardAPIFieldLabel is OpenKruise's sidecarcontrol.ConvertDownwardAPIFieldLabel (S11).
func convertDownwardAPIFieldLabel(version, label string) error {
	if version != "v1" {
		return fmt.Errorf("unsupported pod version: %s", version)
	}
	if path, _, ok := fieldpath.SplitMaybeSubscripted(label); ok {
		switch path {
		case "metadata.annotations", "metadata.labels":
			return nil
		default:
			return fmt.Errorf("field path not supported: %s", path)
		}
	}
	return fmt.Errorf("field label not supported: %s", label)
}

// validatePatchPodMetadata is the syntactic part of compat §2 step 12; the whitelist is a policy.
func validatePatchPodMetadata(patches []v1beta1.SidecarSetPatchPodMetadata, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	seen := map[string]string{}
	for i := range patches {
		patch := &patches[i]
		p := fldPath.Index(i)
		annotationsPath := p.Child("annotations")
		if len(patch.Annotations) == 0 {
			allErrs = append(allErrs, field.Required(annotationsPath, "no annotations defined for SidecarSet"))
		} else {
			allErrs = append(allErrs, apivalidation.ValidateAnnotations(patch.Annotations, annotationsPath)...)
		}
		if patch.PatchPolicy == "" {
			allErrs = append(allErrs, field.Required(p.Child("patchPolicy"), "no patchPolicy defined for patchPodMetadata"))
		}
		// Sorted so that which occurrence is reported does not depend on map order.
		for _, k := range slices.Sorted(maps.Keys(patch.Annotations)) {
			if _, ok := seen[k]; ok {
				allErrs = append(allErrs, field.Invalid(annotationsPath.Key(k), k, fmt.Sprintf("patch annotation[%s] already exist", k)))
				continue
			}
			seen[k] = patch.Annotations[k]
		}
	}
	// Each patch is within the limit on its own; together they land on one pod, which the API
	// server then refuses.
	if len(patches) > 1 && len(allErrs) == 0 {
		if err := apivalidation.ValidateAnnotationsSize(seen); err != nil {
			allErrs = append(allErrs, field.Invalid(fldPath, "", fmt.Sprintf("the patches together write more than a pod may hold: %v", err)))
		}
	}
	return allErrs
}
