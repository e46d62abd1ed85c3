package httpprobe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/agent"
	"github.com/sidecarops/sidecarops/agent/storage"
)

// Name is the plugin's name in config.yaml.
const Name = "http_probe"

// States a probe stores when no state is read from the response, or none can be.
const (
	StateSucceeded = "Succeeded"
	StateFailed    = "Failed"
	// StateUnknown: the expected status came back but stateJSONPath found no string in the body.
	StateUnknown = "Unknown"
)

// maxBody bounds what is read of a response to find its state.
const maxBody = 1 << 20

// Config is the plugin's configuration.
type Config struct {
	StartDelaySeconds int        `json:"startDelaySeconds,omitempty"`
	Endpoints         []Endpoint `json:"endpoints"`
}

// Endpoint is one probed URL. Timeout and PeriodSeconds are seconds (defaults 5 and 10).
type Endpoint struct {
	URL                string            `json:"url"`
	Method             string            `json:"method,omitempty"`
	Headers            map[string]string `json:"headers,omitempty"`
	Timeout            int               `json:"timeout,omitempty"`
	ExpectedStatusCode int               `json:"expectedStatusCode,omitempty"`
	PeriodSeconds      int               `json:"periodSeconds,omitempty"`
	// StateJSONPath, an RFC 6901 pointer, reads the state from a JSON response with the expected
	// status (e.g. /state → "idle"); without it the state is Succeeded.
	StateJSONPath string         `json:"stateJSONPath,omitempty"`
	StorageConfig storage.Config `json:"storageConfig"`
}

// Validate implements agent.Validator.
func (c *Config) Validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.StartDelaySeconds < 0 {
		errs = append(errs, field.Invalid(p.Child("startDelaySeconds"), c.StartDelaySeconds, "must not be negative"))
	}
	if len(c.Endpoints) == 0 {
		errs = append(errs, field.Required(p.Child("endpoints"), "at least one endpoint"))
	}
	for i, e := range c.Endpoints {
		ep := p.Child("endpoints").Index(i)
		if u, err := url.Parse(e.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, field.Invalid(ep.Child("url"), e.URL, "must be an absolute http:// or https:// URL"))
		}
		if e.Method != "" && (strings.ContainsAny(e.Method, " \t\r\n/") || strings.ToUpper(e.Method) != e.Method) {
			errs = append(errs, field.Invalid(ep.Child("method"), e.Method, "must be an upper-case HTTP method such as GET"))
		}
		if e.Timeout < 0 {
			errs = append(errs, field.Invalid(ep.Child("timeout"), e.Timeout, "seconds; must not be negative"))
		}
		if e.PeriodSeconds < 0 {
			errs = append(errs, field.Invalid(ep.Child("periodSeconds"), e.PeriodSeconds, "must not be negative"))
		}
		if e.ExpectedStatusCode != 0 && (e.ExpectedStatusCode < 100 || e.ExpectedStatusCode > 599) {
			errs = append(errs, field.Invalid(ep.Child("expectedStatusCode"), e.ExpectedStatusCode, "must be an HTTP status code (100-599)"))
		}
		if e.StateJSONPath != "" {
			if _, err := storage.ParsePointer(e.StateJSONPath); err != nil {
				errs = append(errs, field.Invalid(ep.Child("stateJSONPath"), e.StateJSONPath, err.Error()))
			}
		}
		errs = append(errs, e.StorageConfig.Validate(ep.Child("storageConfig"))...)
	}
	return errs
}

// Plugin is the http_probe plugin.
type Plugin struct {
	cfg    Config
	host   agent.Host
	client *http.Client

	mu     sync.Mutex
	status []EndpointStatus
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// EndpointStatus is one endpoint's latest outcome.
type EndpointStatus struct {
	URL        string    `json:"url"`
	State      string    `json:"state,omitempty"`
	Detail     string    `json:"detail,omitempty"`
	Probes     int       `json:"probes"`
	LastProbe  time.Time `json:"lastProbe,omitzero"`
	StoreError string    `json:"storeError,omitempty"`
}

// New is the plugin's agent.Factory.
func New() agent.Plugin { return &Plugin{} }

// Name returns Name, the name config.yaml refers to.
func (p *Plugin) Name() string { return Name }

// Version is the plugin's version, shown in the agent's /status.
func (p *Plugin) Version() string { return "v0.1.0" }

// ConfigType returns a new zero Config, into which the manager decodes the plugin's config.
func (p *Plugin) ConfigType() any { return &Config{} }

// Init takes the configuration and fills its defaults.
func (p *Plugin) Init(cfg any, host agent.Host) error {
	c, err := agent.ConfigAs[Config](Name, cfg)
	if err != nil {
		return err
	}
	p.cfg, p.host = *c, host
	p.cfg.Endpoints = append([]Endpoint(nil), c.Endpoints...)
	p.status = make([]EndpointStatus, len(c.Endpoints))
	for i := range p.cfg.Endpoints {
		e := &p.cfg.Endpoints[i]
		e.Method = orDefault(e.Method, http.MethodGet)
		e.Timeout = orDefault(e.Timeout, 5)
		e.PeriodSeconds = orDefault(e.PeriodSeconds, 10)
		e.ExpectedStatusCode = orDefault(e.ExpectedStatusCode, http.StatusOK)
		p.status[i].URL = e.URL
	}
	// Probes are cheap and periodic: no redirects followed, so a 302 is the status probed.
	p.client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Start launches one probe loop per endpoint.
func (p *Plugin) Start(ctx context.Context, _ chan<- error) error {
	ctx, cancel := context.WithCancel(ctx)
	p.mu.Lock()
	p.cancel = cancel
	p.mu.Unlock()
	for i := range p.cfg.Endpoints {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.loop(ctx, i)
		}()
	}
	return nil
}

// Stop ends the probe loops and closes idle connections.
func (p *Plugin) Stop(ctx context.Context) error {
	p.mu.Lock()
	cancel := p.cancel
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	defer p.client.CloseIdleConnections()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("http_probe: probes still running: %w", ctx.Err())
	}
}

// Status lists the endpoints' latest outcomes.
func (p *Plugin) Status() any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]EndpointStatus(nil), p.status...)
}

func (p *Plugin) loop(ctx context.Context, i int) {
	e := p.cfg.Endpoints[i]
	wait := time.Duration(p.cfg.StartDelaySeconds) * time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = time.Duration(e.PeriodSeconds) * time.Second
		rec, detail := p.Probe(ctx, e)
		if ctx.Err() != nil {
			return
		}
		storeErr := p.host.Store(ctx, e.StorageConfig, rec)
		if storeErr != nil && ctx.Err() == nil {
			p.host.Logger().Error(storeErr, "storing probe result", "url", e.URL, "state", rec.State)
		}
		p.mu.Lock()
		s := &p.status[i]
		s.State, s.Detail, s.LastProbe, s.StoreError = rec.State, detail, time.Now(), ""
		s.Probes++
		if storeErr != nil {
			s.StoreError = storeErr.Error()
		}
		p.mu.Unlock()
	}
}

// Probe requests e once and returns the record to store and a human-readable detail.
func (p *Plugin) Probe(ctx context.Context, e Endpoint) (storage.Record, string) {
	failed := func(detail string) (storage.Record, string) {
		return storage.Record{Value: StateFailed, State: StateFailed}, detail
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(e.Timeout)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, e.Method, e.URL, nil)
	if err != nil {
		return failed(err.Error())
	}
	for k, v := range e.Headers {
		req.Header.Set(k, v)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return failed(err.Error())
	}
	defer resp.Body.Close()
	if resp.StatusCode != e.ExpectedStatusCode {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
		return failed(fmt.Sprintf("status %d, expected %d", resp.StatusCode, e.ExpectedStatusCode))
	}
	if e.StateJSONPath == "" {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
		return storage.Record{Value: StateSucceeded, State: StateSucceeded, OK: true}, fmt.Sprintf("status %d", resp.StatusCode)
	}
	unknown := func(detail string) (storage.Record, string) {
		return storage.Record{Value: StateUnknown, State: StateUnknown}, detail
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return failed("reading the response: " + err.Error())
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return unknown("response is not a JSON object: " + err.Error())
	}
	toks, _ := storage.ParsePointer(e.StateJSONPath) // validated with the configuration
	v, found, err := unstructured.NestedFieldNoCopy(doc, toks...)
	state, isString := v.(string)
	if err != nil || !found || !isString || state == "" {
		return unknown(fmt.Sprintf("no string at %s in the response", e.StateJSONPath))
	}
	return storage.Record{Value: state, State: state, OK: true}, fmt.Sprintf("status %d, %s=%s", resp.StatusCode, e.StateJSONPath, state)
}
