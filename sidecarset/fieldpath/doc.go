// Package fieldpath reads Kubernetes downward-API field paths such as metadata.labels['app'], the
// form transferEnv's sourceContainerNameFrom.fieldRef uses (quirk Q9).
//
// It owns the syntax of a path only. It must not decide which paths are allowed
// (sidecarset/validation does) nor resolve them against a pod (package mutation does).
package fieldpath
