// Package defaults fills in a SidecarSet exactly as OpenKruise's defaulting webhook does (compat
// §1.8), including the Kubernetes container and volume defaults that webhook applies by hand.
//
// Exactly, no more and no less: the hash annotations and ControllerRevision names are computed over
// the defaulted object, so any default applied differently — even a harmless one — would make pods
// injected by OpenKruise look outdated to sidecarops and the other way round (quirk Q21). The list,
// and the defaults deliberately not applied, are in docs/validation.md, "Defaulting".
//
// Defaulting never fails, never overrides a value that is set, and is idempotent. It decides
// nothing (sidecarset/validation does) and does not hash (SidecarSetAndHash delegates to
// sidecarset/hashes).
package defaults
