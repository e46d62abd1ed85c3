package agent

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// StatusReport is the body of /status.
type StatusReport struct {
	Version string         `json:"version"`
	Config  ConfigStatus   `json:"config"`
	Plugins []PluginStatus `json:"plugins"`
}

// ConfigStatus is the configuration in force and the last reload's error, if the newest
// config.yaml was rejected.
type ConfigStatus struct {
	File              string        `json:"file"`
	RestartPolicy     RestartPolicy `json:"restartPolicy"`
	Resources         Resources     `json:"resources"`
	SidecarStartOrder string        `json:"sidecarStartOrder"`
	RejectedChange    string        `json:"rejectedChange,omitempty"`
}

// Server is the agent's HTTP face.
type Server struct {
	m *Manager

	mu     sync.Mutex
	config ConfigStatus
}

// NewServer serves m.
func NewServer(m *Manager) *Server { return &Server{m: m} }

func (s *Server) setConfig(file string, c *Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.config = ConfigStatus{File: file, RestartPolicy: c.RestartPolicy, Resources: c.Resources, SidecarStartOrder: c.SidecarStartOrder}
}

func (s *Server) setRejected(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.config.RejectedChange = msg
}

// Handler routes /healthz, /status, /metrics and /plugins/NAME/.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		rep := StatusReport{Version: s.m.Version(), Config: s.config, Plugins: s.m.Statuses()}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.m.o.Metrics.Registry, promhttp.HandlerOpts{}))
	// Plugins come and go with reloads, and a ServeMux cannot unregister, so plugin routes are
	// looked up per request.
	mux.HandleFunc("/plugins/{name}/", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		p, ok := s.m.plugin(name)
		hp, serves := p.(HTTPPlugin)
		if !ok || !serves {
			http.Error(w, "no plugin "+name+" taking requests", http.StatusNotFound)
			return
		}
		http.StripPrefix("/plugins/"+name, hp.Handler()).ServeHTTP(w, r)
	})
	return mux
}
