// Package agent is the sidecar agent of docs/agent.md: a small process a SidecarSet injects into a pod
// to do, from inside the pod, what a node daemon cannot do on virtual nodes — probe the app and
// mark the pod, hot-reload the app's files.
//
// It owns the plugin lifecycle and the agent's face: the Plugin interface, config.yaml (parsing,
// validation with errors naming file, plugin and field, reloading when the mounted ConfigMap
// changes), the plugin manager (add, remove, version, status, start all in bootOrder, stop all in
// reverse, restartPolicy with backoff, store data), the HTTP server (/status, /healthz, /metrics,
// /plugins/NAME/ for plugins that serve requests) and graceful shutdown.
//
// It must not contain what a plugin does (packages under agent/plugins) nor talk to the API server
// itself (package storage does every write); plugins reach both only through Host.
package agent
