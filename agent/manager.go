package agent

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/sidecarops/sidecarops/agent/storage"
)

// Version is the agent's version, reported in /status.
const Version = "v0.1.0"

// State of a plugin in the manager.
type State string

const (
	// StateInitialized means Init succeeded and Start has not been called yet.
	StateInitialized State = "Initialized"
	// StateRunning means Start returned without error and no failure has been reported since.
	StateRunning State = "Running"
	// StateFailed means the plugin failed (to start or while running) and, restartPolicy being
	// Never, stays stopped.
	StateFailed State = "Failed"
	// StateRestarting means the plugin failed and is stopped; restartPolicy being Always, it is
	// started again after the backoff.
	StateRestarting State = "Restarting"
	// StateStopped means the manager stopped the plugin: the agent shuts down, or config.yaml
	// changed or dropped it.
	StateStopped State = "Stopped"
)

// PluginStatus is one plugin in /status.
type PluginStatus struct {
	Name      string    `json:"name"`
	Version   string    `json:"version"`
	BootOrder int       `json:"bootOrder"`
	State     State     `json:"state"`
	Restarts  int       `json:"restarts"`
	LastError string    `json:"lastError,omitempty"`
	Since     time.Time `json:"since"`
	Details   any       `json:"details,omitempty"`
}

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	Registry Registry
	Logger   logr.Logger
	Self     storage.Self
	// Kube is the API access plugins store through; nil runs the agent without Kubernetes (every
	// Store fails with an error saying so).
	Kube *storage.Kube
	// InitialBackoff is the wait before the first restart of a failed plugin (default 1s); it
	// doubles per consecutive failure up to MaxBackoff (default 5m). A plugin that ran for
	// MaxBackoff since its last start counts as healthy again.
	InitialBackoff, MaxBackoff time.Duration
	// StopTimeout bounds each plugin's Stop (default 10s).
	StopTimeout time.Duration
	Metrics     *Metrics
}

// Manager runs the configured plugins. Its methods are safe for concurrent use (the HTTP server
// reads status while a reload replaces plugins).
type Manager struct {
	o ManagerOptions

	mu      sync.Mutex
	policy  RestartPolicy
	plugins map[string]*entry
}

type entry struct {
	pc      PluginConfig
	plugin  Plugin
	state   State
	restart int
	lastErr string
	since   time.Time
	// cancel ends the supervisor of a started plugin; done closes when it has stopped the plugin.
	cancel context.CancelFunc
	done   chan struct{}
}

// NewManager makes a manager with no plugins.
func NewManager(o ManagerOptions) *Manager {
	if o.InitialBackoff <= 0 {
		o.InitialBackoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Minute
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 10 * time.Second
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	return &Manager{o: o, policy: RestartAlways, plugins: map[string]*entry{}}
}

// Setup adds every plugin of c (the manager's "set up"): each gets its configuration and is
// initialised. The first Init error is returned naming the plugin; plugins added before it stay.
func (m *Manager) Setup(c *Config) error {
	m.mu.Lock()
	m.policy = c.RestartPolicy
	m.mu.Unlock()
	for _, pc := range c.Plugins {
		if err := m.AddPlugin(pc); err != nil {
			return err
		}
	}
	return nil
}

// AddPlugin makes the plugin pc names, hands it its decoded configuration and initialises it.
func (m *Manager) AddPlugin(pc PluginConfig) error {
	factory, ok := m.o.Registry[pc.Name]
	if !ok {
		return fmt.Errorf("agent: plugin %q is not built into this agent (known: %v)", pc.Name, m.o.Registry.names())
	}
	if pc.decoded == nil {
		return fmt.Errorf("agent: plugin %s: configuration not decoded (use ParseConfig)", pc.Name)
	}
	m.mu.Lock()
	_, exists := m.plugins[pc.Name]
	m.mu.Unlock()
	if exists {
		return fmt.Errorf("agent: plugin %s is already added", pc.Name)
	}
	p := factory()
	if err := p.Init(pc.decoded, &host{m: m, name: pc.Name}); err != nil {
		return fmt.Errorf("agent: plugin %s: init: %w", pc.Name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.plugins[pc.Name] = &entry{pc: pc, plugin: p, state: StateInitialized, since: time.Now()}
	return nil
}

// RemovePlugin stops the plugin if it runs and forgets it.
func (m *Manager) RemovePlugin(name string) error {
	m.mu.Lock()
	e, ok := m.plugins[name]
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("agent: no plugin %s", name)
	}
	m.stop(e)
	m.mu.Lock()
	delete(m.plugins, name)
	m.mu.Unlock()
	m.o.Metrics.up.DeleteLabelValues(name)
	return nil
}

// Version is the agent's version.
func (m *Manager) Version() string { return Version }

// PluginStatus is one plugin's status.
func (m *Manager) PluginStatus(name string) (PluginStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.plugins[name]
	if !ok {
		return PluginStatus{}, false
	}
	return e.status(), true
}

// Statuses lists every plugin in boot order.
func (m *Manager) Statuses() []PluginStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]PluginStatus, 0, len(m.plugins))
	for _, e := range m.ordered() {
		out = append(out, e.status())
	}
	return out
}

func (e *entry) status() PluginStatus {
	return PluginStatus{Name: e.pc.Name, Version: e.plugin.Version(), BootOrder: e.pc.BootOrder, State: e.state,
		Restarts: e.restart, LastError: e.lastErr, Since: e.since, Details: e.plugin.Status()}
}

// ordered is the plugins in boot order (ties by name); m.mu held.
func (m *Manager) ordered() []*entry {
	es := make([]*entry, 0, len(m.plugins))
	for _, e := range m.plugins {
		es = append(es, e)
	}
	sort.Slice(es, func(i, j int) bool {
		if es[i].pc.BootOrder != es[j].pc.BootOrder {
			return es[i].pc.BootOrder < es[j].pc.BootOrder
		}
		return es[i].pc.Name < es[j].pc.Name
	})
	return es
}

// StartAll starts every plugin that is not running, in boot order, each once the previous one's
// Start returned. A plugin that fails to start is handled by the restart policy; it does not keep
// the others from starting. ctx carries values only: plugins run until StopAll or Apply stops them.
func (m *Manager) StartAll(ctx context.Context) {
	m.mu.Lock()
	var todo []*entry
	for _, e := range m.ordered() {
		if e.cancel == nil {
			todo = append(todo, e)
		}
	}
	m.mu.Unlock()
	for _, e := range todo {
		m.start(ctx, e)
	}
}

// StopAll stops every plugin in reverse boot order.
func (m *Manager) StopAll() {
	m.mu.Lock()
	es := m.ordered()
	m.mu.Unlock()
	for i := len(es) - 1; i >= 0; i-- {
		m.stop(es[i])
	}
}

// start runs the first Start synchronously (so boot order is start order) and leaves the plugin
// to a supervisor goroutine that applies the restart policy. The plugin's life ends with stop
// alone, not with the caller's ctx: were the supervisors to follow a cancelled ctx, every plugin
// would stop at once, in no order, and StopAll could not keep the reverse boot order.
func (m *Manager) start(ctx context.Context, e *entry) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	m.mu.Lock()
	e.cancel, e.done = cancel, done
	m.mu.Unlock()
	failed := make(chan error, 1)
	err := m.startOnce(ctx, e, failed)
	go func() {
		defer close(done)
		m.supervise(ctx, e, failed, err)
	}()
}

func (m *Manager) startOnce(ctx context.Context, e *entry, failed chan error) error {
	if err := e.plugin.Start(ctx, failed); err != nil {
		// Whatever the failed Start got going is released before a restart starts it again.
		m.stopPlugin(e, m.o.Logger.WithValues("plugin", e.pc.Name))
		return fmt.Errorf("start: %w", err)
	}
	m.setState(e, StateRunning, "")
	return nil
}

// supervise waits for the plugin to fail or ctx to end. On failure it stops the plugin and, under
// RestartAlways, starts it again after the backoff; on ctx's end it stops the plugin.
func (m *Manager) supervise(ctx context.Context, e *entry, failed chan error, startErr error) {
	log := m.o.Logger.WithValues("plugin", e.pc.Name)
	backoff := m.o.InitialBackoff
	started := time.Now()
	err := startErr
	for {
		if err == nil {
			select {
			case <-ctx.Done():
				m.stopPlugin(e, log)
				m.setState(e, StateStopped, "")
				return
			case err = <-failed:
				if err == nil {
					err = errors.New("plugin reported a failure without an error")
				}
				m.stopPlugin(e, log)
			}
		}
		log.Error(err, "plugin failed")
		m.o.Metrics.failures.WithLabelValues(e.pc.Name).Inc()
		m.mu.Lock()
		policy := m.policy
		m.mu.Unlock()
		if policy != RestartAlways {
			m.setState(e, StateFailed, err.Error())
			return
		}
		if time.Since(started) >= m.o.MaxBackoff {
			backoff = m.o.InitialBackoff
		}
		m.setState(e, StateRestarting, err.Error())
		select {
		case <-ctx.Done():
			m.setState(e, StateStopped, err.Error())
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, m.o.MaxBackoff)
		m.mu.Lock()
		e.restart++
		m.mu.Unlock()
		m.o.Metrics.restarts.WithLabelValues(e.pc.Name).Inc()
		failed = make(chan error, 1)
		started = time.Now()
		err = m.startOnce(ctx, e, failed)
	}
}

func (m *Manager) stopPlugin(e *entry, log logr.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), m.o.StopTimeout)
	defer cancel()
	if err := e.plugin.Stop(ctx); err != nil {
		log.Error(err, "plugin did not stop cleanly")
	}
}

// stop ends a started plugin's supervisor and waits until the plugin is stopped.
func (m *Manager) stop(e *entry) {
	m.mu.Lock()
	cancel, done := e.cancel, e.done
	e.cancel, e.done = nil, nil
	m.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (m *Manager) setState(e *entry, s State, errMsg string) {
	m.mu.Lock()
	e.state, e.lastErr, e.since = s, errMsg, time.Now()
	m.mu.Unlock()
	up := 0.0
	if s == StateRunning {
		up = 1
	}
	m.o.Metrics.up.WithLabelValues(e.pc.Name).Set(up)
}

// Apply moves the manager to a new configuration: plugins gone from it are stopped and removed,
// changed ones (and failed ones, when the policy is now Always) replaced, new ones added, and
// everything not running started in boot order. Plugins whose configuration did not change keep
// running untouched.
func (m *Manager) Apply(ctx context.Context, c *Config) error {
	m.mu.Lock()
	m.policy = c.RestartPolicy
	want := map[string]*PluginConfig{}
	for i := range c.Plugins {
		want[c.Plugins[i].Name] = &c.Plugins[i]
	}
	var drop []string
	for name, e := range m.plugins {
		// A plugin left failed under Never is replaced too when the policy is now Always.
		revive := e.state == StateFailed && c.RestartPolicy == RestartAlways
		if pc, ok := want[name]; !ok || !e.pc.same(pc) || revive {
			drop = append(drop, name)
		}
	}
	m.mu.Unlock()
	sort.Strings(drop)
	for _, name := range drop {
		if err := m.RemovePlugin(name); err != nil {
			return err
		}
	}
	var errs []error
	for _, pc := range c.Plugins {
		m.mu.Lock()
		_, have := m.plugins[pc.Name]
		m.mu.Unlock()
		if !have {
			errs = append(errs, m.AddPlugin(pc))
		}
	}
	m.StartAll(ctx)
	return errors.Join(errs...)
}

// StoreData writes a plugin's result through storage (the manager's "store data").
func (m *Manager) StoreData(ctx context.Context, plugin string, cfg storage.Config, r storage.Record) error {
	if m.o.Kube == nil {
		m.o.Metrics.stores.WithLabelValues(plugin, "error").Inc()
		return fmt.Errorf("agent: plugin %s: storageConfig needs the Kubernetes API, and the agent runs without it", plugin)
	}
	changed, err := m.o.Kube.Store(ctx, cfg, r)
	result := "unchanged"
	switch {
	case err != nil:
		result = "error"
	case changed:
		result = "written"
	}
	m.o.Metrics.stores.WithLabelValues(plugin, result).Inc()
	if err != nil {
		return fmt.Errorf("agent: plugin %s: %w", plugin, err)
	}
	return nil
}

// plugin is the running plugin by name, for the HTTP server.
func (m *Manager) plugin(name string) (Plugin, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.plugins[name]
	if !ok {
		return nil, false
	}
	return e.plugin, true
}

// host is a plugin's view of the manager.
type host struct {
	m    *Manager
	name string
}

func (h *host) Logger() logr.Logger { return h.m.o.Logger.WithValues("plugin", h.name) }
func (h *host) Self() storage.Self  { return h.m.o.Self }
func (h *host) Kube() *storage.Kube { return h.m.o.Kube }
func (h *host) Refused(reason string) {
	h.m.o.Metrics.refused.WithLabelValues(h.name, reason).Inc()
}
func (h *host) Store(ctx context.Context, cfg storage.Config, r storage.Record) error {
	return h.m.StoreData(ctx, h.name, cfg, r)
}
