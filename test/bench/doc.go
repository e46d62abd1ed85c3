// Package bench measures the policy core end to end: one pod admission is internal/injector.Pod — a
// decision by the engine followed by the mutation core — exactly as the webhook runs it. Benchmarks
// only; figures are recorded in docs/benchmarks.md with the command that produced them.
//
// BenchmarkPerPod (issue 15) runs on the inputs of test/bench/perfinputs, generated at benchmark time
// by its gen_inputs.py (Python 3 and PyYAML), and reports each pod's cost in deep copies of the pod.
package bench
