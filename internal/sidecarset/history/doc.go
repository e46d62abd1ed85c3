// Package history handles SidecarSet ControllerRevisions (compat §1.5, compat §1.10): the data.raw a
// revision stores, its name, finding the revision a SidecarSet's injectionStrategy.revision points
// at, restoring a historical SidecarSet from it, and choosing at injection time between the latest
// spec and that historical one.
//
// It works on ControllerRevisions handed to it through Source. It must never call an API server:
// the webhook and controller list revisions themselves, the CLI reads them from files. Randomness
// is injected so that the Partial policy is testable and reproducible.
package history
