// Package history handles SidecarSet ControllerRevisions (compat §1.5, compat §1.10): the data.raw a
// revision stores, its name, finding the revision injectionStrategy.revision points at, restoring a
// historical SidecarSet from it, and choosing at injection time between the latest spec and that
// historical one.
//
// It works on revisions handed to it (a Source, which the engine's snapshot serves, or a list) and
// must never call an API server: the manager's cache and sidecarctl's files feed the same code.
// Randomness is injected so that the Partial policy is testable and reproducible.
package history
