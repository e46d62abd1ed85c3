// Package bench measures the policy core end to end: one pod admission is a decision by the
// engine followed by the mutation core, as the webhook will run it. Benchmarks only; figures are
// recorded in docs/benchmarks.md with the command that produced them.
package bench
