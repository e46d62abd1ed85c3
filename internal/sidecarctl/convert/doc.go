// Package convert is `sidecarctl convert`'s work over a workspace read (not loaded): every
// SidecarSet rewritten in the version asked for, converted as the API server converts it with the
// manager's conversion webhook (sidecarset/versions, api/v1alpha1), and every other
// document as it is.
//
// It must not default, validate or decide anything (`sidecarctl check` does), nor read files or
// flags.
package convert
