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
