package agent

import (
	"context"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/agent/storage"
)

// Plugin is one capability of the agent. A new plugin is one Go file implementing it plus its name
// in the Registry the agent is built with.
//
// The manager calls Init once per configuration, then Start and Stop, possibly several times when
// the plugin fails and restartPolicy is Always; Stop is always called before the next Start.
type Plugin interface {
	// Name is the name config.yaml refers to.
	Name() string
	// Version of the plugin, shown in /status.
	Version() string
	// ConfigType returns a pointer to a new zero configuration; the manager decodes the plugin's
	// `config` into it, rejecting unknown fields, and validates it when it implements Validator.
	ConfigType() any
	// Init takes the decoded configuration (the pointer ConfigType returned) and the host.
	Init(cfg any, host Host) error
	// Start starts the plugin's work and returns once it runs. A failure after that is sent on
	// failed (at most once); the work ends when ctx is cancelled or Stop is called.
	Start(ctx context.Context, failed chan<- error) error
	// Stop ends the work Start began and returns when it has ended, or when ctx is done.
	Stop(ctx context.Context) error
	// Status is the plugin's own state for /status (JSON-encodable). The agent calls it whenever
	// /status is read, from the HTTP server's goroutines, concurrently with Init, Start and Stop
	// and with the plugin's own work: it must be safe for concurrent use and must not block on it.
	Status() any
}

// Validator is implemented by plugin configurations that check more than their JSON shape; p is
// the configuration's path, so errors name the field.
type Validator interface {
	Validate(p *field.Path) field.ErrorList
}

// HTTPPlugin is implemented by plugins that take requests: the agent serves Handler under
// /plugins/NAME/ (prefix stripped) on its port while the plugin is configured.
type HTTPPlugin interface {
	Handler() http.Handler
}

// Factory makes a new, uninitialised plugin.
type Factory func() Plugin

// Registry maps plugin names to their factories; config.yaml may only name these.
type Registry map[string]Factory

// Host is what the manager gives a plugin.
type Host interface {
	Logger() logr.Logger
	Self() storage.Self
	// Store writes a result as the plugin's storageConfig says (the manager's "store data").
	Store(ctx context.Context, cfg storage.Config, r storage.Record) error
	// Kube is the agent's API access for plugins that keep more than results (nil without one).
	Kube() *storage.Kube
	// Refused counts something the plugin refused for a security reason (a URL outside its
	// allow-list, a stored record without an authenticated writer), so that an attempt shows in the
	// metrics, not only in the log. reason is one of a few fixed words per plugin: it is a label.
	Refused(reason string)
}

// ConfigAs is the configuration Init receives, as the type the plugin's ConfigType returns.
func ConfigAs[T any](plugin string, cfg any) (*T, error) {
	c, ok := cfg.(*T)
	if !ok {
		return nil, fmt.Errorf("%s: configuration of type %T, want %T", plugin, cfg, c)
	}
	return c, nil
}
