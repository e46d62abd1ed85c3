// Package hotupdate is the agent's hot_update plugin: it replaces a file the app reads (in fileDir,
// an emptyDir shared with the app container) and signals the app process to reload it, without
// restarting the pod.
//
// A request (POST /plugins/hot_update/update on the agent's port: url, version, optional sha256
// and fileName) is downloaded next to the target, checked, and renamed over it only once the
// process to signal is known to exist; then the process (found by name in /proc, which needs
// shareProcessNamespace) gets signal.signalName. The result (version, file, success, message,
// time) is stored through storageConfig (the pod annotation) and, on success, as the workload's
// latest version in the result ConfigMap, from which a restarted or newly scaled pod restores the
// file when the plugin starts. A bad URL, a failed download, a checksum mismatch or a missing
// process leave the old file in place and are reported as failures.
//
// It owns downloading, the atomic replacement, the process lookup and signalling, and the
// workload's latest-version record. It must not write to Kubernetes but through the agent Host
// (package storage).
package hotupdate
