// Command sidecar-agent is the sidecar agent a SidecarSet injects into game-server pods (docs/agent.md):
// it runs the plugins config.yaml names (http_probe, hot_update) and stores their results on the
// pod, as the pod's ServiceAccount. It owns flags, the API client and signal handling; everything
// else is package agent's.
package main
