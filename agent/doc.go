// Package agent is the sidecar agent of docs/agent.md: a process a SidecarSet injects into a pod to
// do from inside it what a node daemon cannot do on virtual nodes — probe the app and mark the pod,
// hot-reload the app's files.
//
// It owns the plugin lifecycle and the agent's face: the Plugin interface, config.yaml (parsing,
// validation, reloading), the plugin manager (boot order, restartPolicy with backoff), the HTTP
// server (/status, /healthz, /metrics, /plugins/NAME/), closed to every caller an Authorizer does not
// let through (agent/auth is the one asking the API server), and graceful shutdown.
//
// It must not hold what a plugin does (agent/plugins/...) nor talk to the API server itself
// (agent/storage does every write): plugins reach both only through Host.
package agent
