// Package bench measures the policy core end to end: one pod admission is internal/injector.Pod — a
// decision by the engine followed by the mutation core — exactly as the webhook runs it. Benchmarks
// only; figures are recorded in docs/benchmarks.md with the command that produced them.
package bench
