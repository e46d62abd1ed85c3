// Package agenttest gives plugin tests an agent.Host that records what plugins store instead of
// writing it to Kubernetes (Kube is nil), so a plugin's output can be asserted without an API
// server. Tests that need the API server use the real one (test/agent). It must not be imported
// by non-test code.
package agenttest
