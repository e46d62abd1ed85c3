// Package version is what a sidecarops binary says it is: its version and commit, stamped at build
// time (-ldflags -X, make build) or else read from the Go build information, the Go version it was
// built with and the OPA version it embeds.
//
// It must not read anything at run time but the binary's own build information.
package version
