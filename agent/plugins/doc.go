// Package plugins is the list of plugins built into the sidecar agent: adding a plugin is its
// package plus one line in Builtin. It must not hold plugin behaviour.
package plugins
