package injector

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/sidecarset/defaults"
	"github.com/sidecarops/sidecarops/internal/sidecarset/validation"
)

// ValidateSidecarSet answers what the validating webhook answers for ss (old on UPDATE, else nil):
// it defaults ss in place (decision D5: in a cluster the defaulting webhook has run, and defaulting
// twice changes nothing), applies the single-object rules and, only when those pass, the policy
// checks against snap's other SidecarSets and the whitelist, as OpenKruise does. old is validated
// as stored: defaulting it could make an upgradeType that was never set look immutable. The error
// is a failure to evaluate the policies; a refusal is the ErrorList.
func ValidateSidecarSet(ctx context.Context, snap *engine.Snapshot, ss, old *v1alpha1.SidecarSet) (field.ErrorList, error) {
	defaults.SidecarSet(ss)
	if errs := validation.SidecarSet(ss, old, snap.History(), snap); len(errs) > 0 {
		return errs, nil
	}
	return snap.PolicyErrors(ctx, ss)
}
