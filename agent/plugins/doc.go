// Package plugins is the list of plugins built into the sidecar agent: adding a plugin is its
// package plus one line in Builtin. It must not hold plugin behaviour.
package plugins

import (
	"github.com/sidecarops/sidecarops/agent"
	"github.com/sidecarops/sidecarops/agent/plugins/hotupdate"
	"github.com/sidecarops/sidecarops/agent/plugins/httpprobe"
)

// Builtin is the registry cmd/sidecar-agent runs with.
func Builtin() agent.Registry {
	return agent.Registry{
		httpprobe.Name: httpprobe.New,
		hotupdate.Name: hotupdate.New,
	}
}
