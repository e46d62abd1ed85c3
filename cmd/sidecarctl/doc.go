// Command sidecarctl shows offline what the sidecarops webhook would do: it injects SidecarSets into
// workload manifests, checks SidecarSets, explains matching, compiles policy bundles and runs the
// policies' tests.
//
// It is a face: every decision comes from the policies through package engine, every mutation from
// package mutation. It owns flags, file handling and output, nothing else.
package main
