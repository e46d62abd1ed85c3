// Package vectors holds the concrete cases of docs/openkruise-compat.md (compat §1.9, compat §1.10,
// compat §4.3) as Go values, spelled out by hand for the tests of the packages that must reproduce
// them (sidecarset/hashes and history), so that those tests do not depend on the defaulting
// they would otherwise be checking against.
//
// It is test support: no production code may import it.
package vectors
