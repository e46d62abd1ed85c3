package validation

import (
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/sidecarset/history"
)

// Lookup finds another SidecarSet by name. It is how validation reads the canary base; the
// SidecarSet returned must not be modified.
type Lookup interface {
	SidecarSet(name string) (*v1beta1.SidecarSet, bool)
}

// LookupFunc adapts a function to Lookup.
type LookupFunc func(name string) (*v1beta1.SidecarSet, bool)

// SidecarSet implements Lookup.
func (f LookupFunc) SidecarSet(name string) (*v1beta1.SidecarSet, bool) { return f(name) }

// NewStaticLookup returns a Lookup over a fixed set of SidecarSets (nil entries are skipped; of two
// with the same name the later wins).
func NewStaticLookup(sets ...*v1beta1.SidecarSet) Lookup {
	byName := make(map[string]*v1beta1.SidecarSet, len(sets))
	for _, s := range sets {
		if s != nil {
			byName[s.Name] = s
		}
	}
	return LookupFunc(func(name string) (*v1beta1.SidecarSet, bool) {
		s, ok := byName[name]
		return s, ok
	})
}

// SidecarSet validates ss on its own (compat §2 steps 1–5 and the syntax of step 12), in OpenKruise's
// order: metadata, canary annotations, spec, then — when old is not nil, i.e. on UPDATE — the
// rules that compare with the previous version. See docs/validation.md for the
// parameters.
func SidecarSet(ss, old *v1beta1.SidecarSet, revs history.Source, others Lookup) field.ErrorList {
	if ss == nil {
		return field.ErrorList{field.Required(field.NewPath("spec"), "no SidecarSet given")}
	}
	allErrs := apivalidation.ValidateObjectMeta(&ss.ObjectMeta, false, validateName, field.NewPath("metadata"))
	allErrs = append(allErrs, validateCanary(ss, old, others)...)
	allErrs = append(allErrs, validateV1alpha1Fields(ss, old)...)
	allErrs = append(allErrs, validateSpec(ss, revs, field.NewPath("spec"))...)
	if old != nil {
		allErrs = append(allErrs, validateContainersUpdate(ss.Spec.Containers, old.Spec.Containers, field.NewPath("spec", "containers"))...)
	}
	return allErrs
}

const (
	nameMaxLen = 63
	nameFmt    = `^[a-zA-Z0-9\-]+$`
	nameMsg    = "sidecarset name must consist of alphanumeric characters or '-'"
)

var nameRegexp = regexp.MustCompile(nameFmt)

// validateName is OpenKruise's SidecarSet name rule; it is looser than a DNS label (upper case is
// allowed) and is kept as is so that every name OpenKruise admits is admitted here.
func validateName(name string, _ bool) []string {
	var msgs []string
	if !nameRegexp.MatchString(name) {
		msgs = append(msgs, content.RegexError(nameMsg, nameFmt, "example-com"))
	}
	if len(name) > nameMaxLen {
		msgs = append(msgs, content.MaxLenError(nameMaxLen))
	}
	return msgs
}

// isCanary is OpenKruise's definition (case-sensitive "true" and a non-empty base), shared with
// the bundle's normalised "canary" field.
func isCanary(ss *v1beta1.SidecarSet) bool {
	return ss.Annotations[v1beta1.SidecarSetCanaryAnnotation] == "true" && ss.Annotations[v1beta1.SidecarSetBaseAnnotation] != ""
}

// validateCanary checks a canary's own annotations (compat §2 step 2, V39–V46).
func validateCanary(ss, old *v1beta1.SidecarSet, others Lookup) field.ErrorList {
	if !isCanary(ss) {
		return nil
	}
	base := ss.Annotations[v1beta1.SidecarSetBaseAnnotation]
	basePath := field.NewPath("metadata", "annotations").Key(v1beta1.SidecarSetBaseAnnotation)
	if base == ss.Name {
		return field.ErrorList{field.Invalid(basePath, base, "base sidecarSet cannot be itself")}
	}
	var allErrs field.ErrorList
	// Immutable once set: moving a canary to another base would silently change which pods the old
	// base stops injecting. Making an existing SidecarSet a canary is a new setting, not a change.
	if old != nil {
		if oldBase := old.Annotations[v1beta1.SidecarSetBaseAnnotation]; oldBase != "" && oldBase != base {
			allErrs = append(allErrs, field.Invalid(basePath, base,
				fmt.Sprintf("annotations[%s] is immutable", v1beta1.SidecarSetBaseAnnotation)))
		}
	}
	var baseSet *v1beta1.SidecarSet
	found := false
	if others != nil {
		baseSet, found = others.SidecarSet(base)
	}
	switch {
	case !found || baseSet == nil:
		// The API server's NotFound text, which OpenKruise's message embeds.
		allErrs = append(allErrs, field.Invalid(basePath, base, fmt.Sprintf(
			"fetch base sidecarSet[%s] failed: sidecarsets.apps.kruise.io %q not found", base, base)))
	case isCanary(baseSet):
		allErrs = append(allErrs, field.Invalid(basePath, base, "base sidecarSet cannot be canary"))
	}
	if t := ss.Spec.UpdateStrategy.Type; t != v1beta1.NotUpdateSidecarSetStrategyType {
		allErrs = append(allErrs, field.Invalid(field.NewPath("spec", "updateStrategy", "type"), t,
			"RollingUpdate is not supported for canary sidecarSet"))
	}
	return allErrs
}

// validateV1alpha1Fields holds v1alpha1.V1alpha1FieldsAnnotation, which the conversion from
// v1alpha1 writes and gives back to v1alpha1 readers as their spec.namespace and namespaceSelector,
// to what the conversion writes: when new or changed in this write, it must describe the spec, and
// the namespaceSelector it carries must be one. One left unchanged is not judged again: the
// conversion ignores it once a v1beta1 client has changed the spec it described, and refusing it
// then would refuse that client a write of what it was given.
func validateV1alpha1Fields(ss, old *v1beta1.SidecarSet) field.ErrorList {
	raw, ok := ss.Annotations[v1alpha1.V1alpha1FieldsAnnotation]
	if !ok {
		return nil
	}
	if old != nil {
		if was, had := old.Annotations[v1alpha1.V1alpha1FieldsAnnotation]; had && was == raw {
			return nil
		}
	}
	p := field.NewPath("metadata", "annotations").Key(v1alpha1.V1alpha1FieldsAnnotation)
	f, _, ignored := v1alpha1.ReadReplacedFields(ss)
	if f.NamespaceSelector != nil {
		if errs := validateSelectorSyntax(f.NamespaceSelector, p.Child("namespaceSelector")); len(errs) > 0 {
			return errs
		}
	}
	if ignored != nil {
		return field.ErrorList{field.Invalid(p, raw, ignored.Error()+
			"; only the conversion writes it: remove it, or write the SidecarSet as v1alpha1")}
	}
	return nil
}

// validateContainersUpdate holds the UPDATE-only rules (compat §2 step 4): containers (not
// initContainers) cannot be added or renamed, because pods already injected could never be brought
// to the new spec in place; and a container's upgradeType, once set, cannot change.
func validateContainersUpdate(containers, oldContainers []v1beta1.SidecarContainer, fldPath *field.Path) field.ErrorList {
	oldType := make(map[string]v1beta1.SidecarContainerUpgradeType, len(oldContainers))
	for i := range oldContainers {
		oldType[oldContainers[i].Name] = oldContainers[i].UpgradeStrategy.UpgradeType
	}
	var allErrs field.ErrorList
	for i := range containers {
		c := &containers[i]
		t, ok := oldType[c.Name]
		switch {
		case !ok:
			allErrs = append(allErrs, field.Invalid(fldPath.Index(i).Child("name"), c.Name,
				fmt.Sprintf("container %s is not found", c.Name)))
		case t != "" && c.UpgradeStrategy.UpgradeType != t:
			allErrs = append(allErrs, field.Invalid(fldPath.Index(i).Child("upgradeStrategy", "upgradeType"),
				c.UpgradeStrategy.UpgradeType, fmt.Sprintf("container %s upgradeType is immutable", c.Name)))
		}
	}
	return allErrs
}
