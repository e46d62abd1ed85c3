// Command loadgen (`go run ./hack/loadgen`) posts pod AdmissionReviews over HTTPS to the sidecarops
// pod webhook and reports admissions per second, the latency distribution, errors and the CPU each
// admission costs, beside the floor of decoding and encoding the same AdmissionReview in-process.
//
// Without --url it starts the webhook server in-process, configured like the manager's, on a snapshot
// of a generated fleet (internal/testing/fleet); with --url it targets a manager already running on
// this machine (loopback only). Every answer is checked, and any failure makes the exit status 1.
// docs/benchmarks.md, "Load generator", says how to run it and has the figures.
package main
