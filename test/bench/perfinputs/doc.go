// Package perfinputs generates and reads the per-pod performance inputs of issue 15: N SidecarSets
// of which about 1% (at least one) select a realistic ReplicaSet pod as the API server sends it to
// a mutating webhook, with the pod's Namespace.
//
// gen_inputs.py is the generator the OpenKruise comparison was measured with, copied
// unchanged from the workplace's shared perf directory (../shared/perf/gen_inputs.py when this
// package was written) so that the repository reproduces its figures on its own. Its output is
// deterministic for a seed; the 10,000 set is 12 MB, so nothing is committed: Generate writes the
// sizes a benchmark needs into a temporary directory (Python 3 and PyYAML are required).
//
// It is benchmark support: no production code may import it.
package perfinputs
