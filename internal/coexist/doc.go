// Package coexist is what the manager does next to an OpenKruise kept for its other workloads
// (migration path B, docs/decisions.md D10) beyond answering pods after OpenKruise's pod webhook:
// it keeps OpenKruise's own SidecarSet webhooks out of OpenKruise's webhook configurations, so that
// SidecarSet writes are defaulted and validated once, by sidecarops, and never wait on OpenKruise.
//
// It owns those two configurations' SidecarSet entries only: OpenKruise's pod webhook and every
// other entry stay as OpenKruise registers them. It must not decide anything about SidecarSets or
// pods.
package coexist
