// Package sidecarset is the ground floor every other package stands on: OpenKruise's SidecarSet
// mechanics, reproduced exactly (docs/openkruise-compat.md §1–§2), in subpackages:
//
//   - defaults: the defaulting webhook's work, and SidecarSetAndHash;
//   - hashes: the kruise.io/sidecarset-hash(-without-image) annotations;
//   - history: ControllerRevisions' data, names, lookup and the revision an injection uses;
//   - validation: the single-object rules, as a field.ErrorList;
//   - versions: decoding either API version and handing back the version a client wrote;
//   - resourcespolicy: resourcesPolicy's expressions and aggregation;
//   - fieldpath: the syntax of downward-API field paths.
//
// They are pure functions of SidecarSets, pods and revisions: they must not decide what the
// policies decide (which SidecarSets match, conflict or may patch what), mutate pods (package
// mutation does), talk to an API server, read a clock or import any package of this module beyond
// api/. This directory holds no code of its own.
package sidecarset
