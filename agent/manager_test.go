package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/agent/storage"
)

// journal records plugin lifecycle calls in order, as "name:event".
type journal struct {
	mu     sync.Mutex
	events []string
}

func (j *journal) add(name, event string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, name+":"+event)
}

func (j *journal) list() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.events...)
}

func (j *journal) count(event string) int {
	n := 0
	for _, e := range j.list() {
		if e == event {
			n++
		}
	}
	return n
}

// testConfig drives a testPlugin: FailStarts makes its first Starts fail, FailRunning makes every
// successful Start report a failure shortly after.
type testConfig struct {
	FailStarts  int    `json:"failStarts,omitempty"`
	FailRunning bool   `json:"failRunning,omitempty"`
	Tag         string `json:"tag,omitempty"`
}

func (c *testConfig) Validate(p *field.Path) field.ErrorList {
	if c.FailStarts < 0 {
		return field.ErrorList{field.Invalid(p.Child("failStarts"), c.FailStarts, "must not be negative")}
	}
	return nil
}

type testPlugin struct {
	name   string
	j      *journal
	cfg    *testConfig
	starts atomic.Int32 // read by Status concurrently with Start (the Plugin contract)
	stop   chan struct{}
}

func (p *testPlugin) Name() string    { return p.name }
func (p *testPlugin) Version() string { return "v1" }
func (p *testPlugin) ConfigType() any { return &testConfig{} }
func (p *testPlugin) Status() any     { return map[string]int32{"starts": p.starts.Load()} }
func (p *testPlugin) Init(cfg any, _ Host) error {
	p.cfg = cfg.(*testConfig)
	p.j.add(p.name, "init")
	return nil
}

func (p *testPlugin) Start(_ context.Context, failed chan<- error) error {
	n := p.starts.Add(1)
	if int(n) <= p.cfg.FailStarts {
		p.j.add(p.name, "start-failed")
		return fmt.Errorf("start %d refused", n)
	}
	p.j.add(p.name, "start")
	p.stop = make(chan struct{})
	if p.cfg.FailRunning {
		go func(stop chan struct{}) {
			select {
			case <-time.After(20 * time.Millisecond):
				failed <- errors.New("lost the game server")
			case <-stop:
			}
		}(p.stop)
	}
	return nil
}

func (p *testPlugin) Stop(context.Context) error {
	p.j.add(p.name, "stop")
	if p.stop != nil {
		close(p.stop)
		p.stop = nil
	}
	return nil
}

func (p *testPlugin) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s tag=%s", p.name, r.URL.Path, p.cfg.Tag)
	})
}

func registry(j *journal, names ...string) Registry {
	r := Registry{}
	for _, n := range names {
		r[n] = func() Plugin { return &testPlugin{name: n, j: j} }
	}
	return r
}

func newManager(t *testing.T, reg Registry) *Manager {
	return NewManager(ManagerOptions{Registry: reg, Logger: testr.New(t), InitialBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond})
}

func setup(t *testing.T, reg Registry, yaml string) *Manager {
	t.Helper()
	c, err := ParseConfig("config.yaml", []byte(yaml), reg)
	require.NoError(t, err)
	m := newManager(t, reg)
	require.NoError(t, m.Setup(c))
	return m
}

func state(m *Manager, name string) State {
	s, _ := m.PluginStatus(name)
	return s.State
}

func TestBootOrder(t *testing.T) {
	j := &journal{}
	m := setup(t, registry(j, "a", "b", "c", "d"), `
plugins:
- {name: a, bootOrder: 2}
- {name: b}
- {name: c, bootOrder: 1}
- {name: d, bootOrder: 1}
`)
	m.StartAll(context.Background())
	m.StopAll()
	assert.Equal(t, []string{
		"b:init", "c:init", "d:init", "a:init",
		"b:start", "c:start", "d:start", "a:start",
		"a:stop", "d:stop", "c:stop", "b:stop",
	}, j.list())
	for _, n := range []string{"a", "b", "c", "d"} {
		assert.Equal(t, StateStopped, state(m, n))
	}
}

func TestRestartPolicy(t *testing.T) {
	tests := []struct {
		name     string
		policy   string
		flaky    string // the flaky plugin's config
		state    State
		restarts int
		events   []string // the flaky plugin's events, in order
	}{
		{"Always restarts a plugin whose start fails", "Always", "{failStarts: 2}", StateRunning, 2,
			[]string{"flaky:start-failed", "flaky:stop", "flaky:start-failed", "flaky:stop", "flaky:start"}},
		{"Never leaves it failed", "Never", "{failStarts: 2}", StateFailed, 0,
			[]string{"flaky:start-failed", "flaky:stop"}},
		{"Always restarts a plugin failing while running", "Always", "{failRunning: true}", StateRestarting, 3,
			[]string{"flaky:start", "flaky:stop", "flaky:start", "flaky:stop", "flaky:start", "flaky:stop", "flaky:start"}},
		{"Never stops a plugin failing while running", "Never", "{failRunning: true}", StateFailed, 0,
			[]string{"flaky:start", "flaky:stop"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &journal{}
			m := setup(t, registry(j, "flaky", "steady"), fmt.Sprintf(`
restartPolicy: %s
plugins:
- {name: flaky, config: %s}
- {name: steady, bootOrder: 1}
`, tt.policy, tt.flaky))
			m.StartAll(context.Background())
			require.Eventually(t, func() bool {
				s, _ := m.PluginStatus("flaky")
				return s.Restarts >= tt.restarts && (s.State == tt.state || tt.state == StateRestarting)
			}, time.Minute, 5*time.Millisecond)
			if tt.policy == "Never" {
				// Nothing more happens to a failed plugin.
				time.Sleep(100 * time.Millisecond)
			}
			m.StopAll()
			var flaky []string
			for _, e := range j.list() {
				if e[:6] == "flaky:" && e != "flaky:init" {
					flaky = append(flaky, e)
				}
			}
			require.GreaterOrEqual(t, len(flaky), len(tt.events))
			assert.Equal(t, tt.events, flaky[:len(tt.events)])
			if tt.policy == "Never" {
				assert.Equal(t, tt.events, flaky)
				s, _ := m.PluginStatus("flaky")
				assert.Equal(t, StateFailed, s.State)
				assert.NotEmpty(t, s.LastError)
			}
			assert.Equal(t, 1, j.count("steady:start"), "the other plugin is not touched")
			assert.Equal(t, 1, j.count("steady:stop"))
		})
	}
}

func TestApply(t *testing.T) {
	j := &journal{}
	reg := registry(j, "kept", "changed", "removed", "added")
	m := setup(t, reg, `
plugins:
- {name: kept}
- {name: changed, config: {tag: one}}
- {name: removed}
`)
	ctx := context.Background()
	m.StartAll(ctx)
	c, err := ParseConfig("config.yaml", []byte(`
restartPolicy: Never
plugins:
- {name: kept}
- {name: changed, config: {tag: two}}
- {name: added, bootOrder: 1}
`), reg)
	require.NoError(t, err)
	require.NoError(t, m.Apply(ctx, c))
	assert.Equal(t, 1, j.count("kept:start"))
	assert.Equal(t, 0, j.count("kept:stop"))
	assert.Equal(t, 2, j.count("changed:init"))
	assert.Equal(t, 2, j.count("changed:start"))
	assert.Equal(t, 1, j.count("removed:stop"))
	assert.Equal(t, 1, j.count("added:start"))
	_, ok := m.PluginStatus("removed")
	assert.False(t, ok)
	var names []string
	for _, s := range m.Statuses() {
		names = append(names, s.Name)
		assert.Equal(t, StateRunning, s.State, s.Name)
	}
	assert.Equal(t, []string{"changed", "kept", "added"}, names)
	p, _ := m.plugin("changed")
	assert.Equal(t, "two", p.(*testPlugin).cfg.Tag)
	m.mu.Lock()
	assert.Equal(t, RestartNever, m.policy)
	m.mu.Unlock()
	m.StopAll()
}

func TestManagerErrors(t *testing.T) {
	j := &journal{}
	reg := registry(j, "a")
	m := setup(t, reg, "plugins: [{name: a}]")
	c, err := ParseConfig("config.yaml", []byte("plugins: [{name: a}]"), reg)
	require.NoError(t, err)
	assert.EqualError(t, m.AddPlugin(c.Plugins[0]), "agent: plugin a is already added")
	assert.EqualError(t, m.AddPlugin(PluginConfig{Name: "zzz"}), `agent: plugin "zzz" is not built into this agent (known: [a])`)
	assert.EqualError(t, m.AddPlugin(PluginConfig{Name: "a"}), "agent: plugin a: configuration not decoded (use ParseConfig)")
	assert.EqualError(t, m.RemovePlugin("zzz"), "agent: no plugin zzz")
	require.NoError(t, m.RemovePlugin("a"))
	assert.Empty(t, m.Statuses())
	err = m.StoreData(context.Background(), "a", storage.Config{Type: storage.TypeInKube}, storage.Record{Value: "x"})
	assert.EqualError(t, err, "agent: plugin a: storageConfig needs the Kubernetes API, and the agent runs without it")
}

// A plugin left failed under Never runs again once a reload says Always.
func TestApplyRevivesFailed(t *testing.T) {
	j := &journal{}
	reg := registry(j, "flaky", "steady")
	m := setup(t, reg, "restartPolicy: Never\nplugins: [{name: flaky, config: {failStarts: 1}}, {name: steady}]")
	ctx := context.Background()
	m.StartAll(ctx)
	require.Eventually(t, func() bool { return state(m, "flaky") == StateFailed }, time.Minute, 5*time.Millisecond)
	c, err := ParseConfig("config.yaml", []byte("restartPolicy: Always\nplugins: [{name: flaky, config: {failStarts: 1}}, {name: steady}]"), reg)
	require.NoError(t, err)
	require.NoError(t, m.Apply(ctx, c))
	// A new instance: its first Start fails again, and Always restarts it.
	require.Eventually(t, func() bool { return state(m, "flaky") == StateRunning }, time.Minute, 5*time.Millisecond)
	assert.Equal(t, 2, j.count("flaky:init"))
	assert.Equal(t, 1, j.count("steady:start"))
	m.StopAll()
}
