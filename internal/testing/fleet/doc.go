// Package fleet builds the synthetic SidecarSet fleets (and the pod) that the benchmarks and the
// load generator measure against, so that their figures describe the same workload.
//
// It is test support: no production code may import it.
package fleet
