// Package controller is the SidecarSet controller (compat §3): it reconciles each SidecarSet against
// the pods it injected — registering ControllerRevisions, writing status, and upgrading sidecars in
// place (cold and hot) as the update strategy allows — and reports why pods wait.
//
// It owns the side effects: reading the informer caches, writing pods, pod conditions,
// ControllerRevisions, SidecarSet status and Events, and the expectations that keep a stale cache
// from upgrading a pod twice. Every decision — which pods, in which order, how many, what an upgraded
// pod looks like, how revisions change, what the status says — is package rollout's; this package
// must not re-derive any of it. It must not inject (the webhook does) nor touch the policy bundles.
//
// Deliberate differences from OpenKruise, none of which changes what a rollout does:
//   - a pod deletion enqueues its SidecarSets, so status never stays stale (quirk Q16);
//   - pod events are not filtered out for NotUpdate SidecarSets, so their status stays current;
//   - a consistency flip enqueues at once rather than after 5 s, and a pod whose hash changed
//     enqueues too, so the next batch of a rollout starts as soon as the cache has seen the last;
//   - the pods of one round are written concurrently (bounded), not one by one: images first, then
//     the status, then the pods' SidecarSetUpgradable conditions;
//   - pod creations enqueue after 0.5 s, so a scale-up costs one reconcile, not one per pod.
package controller
