package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// RestartPolicy says what happens to a plugin that fails.
type RestartPolicy string

const (
	// RestartAlways restarts a failed plugin after a backoff that doubles per consecutive failure.
	RestartAlways RestartPolicy = "Always"
	// RestartNever leaves a failed plugin failed; the other plugins keep running.
	RestartNever RestartPolicy = "Never"
)

// Config is config.yaml (docs/agent.md). Field names match case-insensitively, so all-lower-case
// spellings (bootorder, restartpolicy, sidecarstartorder) read the same.
type Config struct {
	Plugins       []PluginConfig `json:"plugins"`
	RestartPolicy RestartPolicy  `json:"restartPolicy,omitempty"`
	// Resources and SidecarStartOrder describe how the SidecarSet injects the agent; the agent
	// validates them and reports them in /status so a mismatch with the SidecarSet is visible.
	Resources         Resources `json:"resources,omitempty"`
	SidecarStartOrder string    `json:"sidecarStartOrder,omitempty"`
}

// PluginConfig is one entry of plugins.
type PluginConfig struct {
	Name      string          `json:"name"`
	Config    json.RawMessage `json:"config,omitempty"`
	BootOrder int             `json:"bootOrder,omitempty"`

	decoded any
}

// Resources is the agent container's resources as docs/agent.md writes them.
type Resources struct {
	CPU    string `json:"CPU,omitempty"`
	Memory string `json:"Memory,omitempty"`
}

// ConfigError lists everything wrong with a config.yaml, one line per problem naming the file,
// the plugin when the problem is inside one, and the field.
type ConfigError struct {
	File     string
	Problems []Problem
}

// Problem is one invalid field; Plugin is set for fields of a plugin entry.
type Problem struct {
	Plugin string
	Err    *field.Error
}

func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		if p.Plugin != "" {
			lines[i] = fmt.Sprintf("%s: plugin %s: %s", e.File, p.Plugin, p.Err.Error())
		} else {
			lines[i] = fmt.Sprintf("%s: %s", e.File, p.Err.Error())
		}
	}
	return strings.Join(lines, "\n")
}

// ParseConfig decodes config.yaml (file names it in errors), defaults it and decodes and validates
// every plugin's configuration. An unknown plugin name, an unknown field or an invalid value is an
// error; nothing is dropped.
func ParseConfig(file string, data []byte, reg Registry) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if c.RestartPolicy == "" {
		c.RestartPolicy = RestartAlways
	}
	if c.SidecarStartOrder == "" {
		c.SidecarStartOrder = "Before"
	}
	var probs []Problem
	top := func(errs ...*field.Error) {
		for _, e := range errs {
			probs = append(probs, Problem{Err: e})
		}
	}
	switch c.RestartPolicy {
	case RestartAlways, RestartNever:
	default:
		top(field.NotSupported(field.NewPath("restartPolicy"), c.RestartPolicy, []RestartPolicy{RestartAlways, RestartNever}))
	}
	if c.SidecarStartOrder != "Before" && c.SidecarStartOrder != "After" {
		top(field.NotSupported(field.NewPath("sidecarStartOrder"), c.SidecarStartOrder, []string{"Before", "After"}))
	}
	for name, q := range map[string]string{"CPU": c.Resources.CPU, "Memory": c.Resources.Memory} {
		if q == "" {
			continue
		}
		if _, err := resource.ParseQuantity(q); err != nil {
			top(field.Invalid(field.NewPath("resources", name), q, err.Error()))
		}
	}
	seen := map[string]bool{}
	for i := range c.Plugins {
		pc := &c.Plugins[i]
		p := field.NewPath("plugins").Index(i)
		add := func(errs ...*field.Error) {
			for _, e := range errs {
				probs = append(probs, Problem{Plugin: pc.Name, Err: e})
			}
		}
		factory, ok := reg[pc.Name]
		switch {
		case pc.Name == "":
			add(field.Required(p.Child("name"), ""))
			continue
		case !ok:
			add(field.NotSupported(p.Child("name"), pc.Name, reg.names()))
			continue
		case seen[pc.Name]:
			add(field.Duplicate(p.Child("name"), pc.Name))
			continue
		}
		seen[pc.Name] = true
		pc.decoded = factory().ConfigType()
		cp := p.Child("config")
		raw := pc.Config
		if len(raw) == 0 || string(raw) == "null" {
			raw = []byte("{}")
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(pc.decoded); err != nil {
			add(field.Invalid(cp, string(pc.Config), err.Error()))
			continue
		}
		if v, ok := pc.decoded.(Validator); ok {
			add(v.Validate(cp)...)
		}
	}
	if len(probs) > 0 {
		return nil, &ConfigError{File: file, Problems: probs}
	}
	// Stable: plugins with the same bootOrder start in the order config.yaml lists them.
	sort.SliceStable(c.Plugins, func(i, j int) bool { return c.Plugins[i].BootOrder < c.Plugins[j].BootOrder })
	return &c, nil
}

func (r Registry) names() []string {
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// same reports whether two entries configure a plugin identically (a reload leaves it running).
func (pc *PluginConfig) same(o *PluginConfig) bool {
	return pc.Name == o.Name && pc.BootOrder == o.BootOrder && bytes.Equal(pc.Config, o.Config)
}
