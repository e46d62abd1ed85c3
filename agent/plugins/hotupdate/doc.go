// Package hotupdate is the agent's hot_update plugin (docs/agent.md §7): it replaces a file the app
// reads, in an emptyDir shared with it, and signals the app process to reload it, without restarting
// the pod.
//
// It owns where files may come from (allowedURLPrefixes, redirects, non-public addresses refused at
// dial time), downloading, the size bound and the checksum, the atomic rename (only once the process
// to signal is known to exist, so a failure leaves the old file in place), the process lookup in
// /proc, the signal, and the workload's latest-version record a new or restarted pod restores from,
// and only when an authenticated request wrote it.
//
// It must not write to Kubernetes but through the agent Host (agent/storage).
package hotupdate
