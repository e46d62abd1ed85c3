// Package agenttest holds what the agent's tests share: a Host that records what plugins store
// instead of writing it to Kubernetes (Kube is nil), so a plugin's output can be asserted without
// an API server (tests that need one use the real one, test/agent), and the sigrecorder child
// process (StartSignalRecorder) that hot-update tests signal, and a logger counting the lines
// logged (LogLines). It must not be imported by non-test code.
package agenttest
