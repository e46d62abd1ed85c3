// Command sidecarctl shows offline what the sidecarops webhook would do: it injects SidecarSets into
// workload manifests, checks SidecarSets, explains matching, compiles policy bundles, runs the
// policies' tests and plans rollouts.
//
// It is a face: injection, validation and the SidecarSet policies' verdicts go through
// internal/injector, the same path the webhooks take, so the CLI cannot disagree with a cluster;
// rollout plans are controller/rollout's own decisions. It owns flags, file handling and output,
// nothing else.
package main
