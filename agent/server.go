package agent

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sidecarops/sidecarops/internal/kubeauth"
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
	m     *Manager
	authz Authorizer
	// Callers can make either as often as they like: logged sampled.
	failedLog, throttledLog *kubeauth.Sampler

	mu     sync.Mutex
	config ConfigStatus
}

// NewServer serves m. Every request but /healthz must pass authz; a nil authz (the agent runs without
// the Kubernetes API, so nobody can be authenticated) refuses them all.
func NewServer(m *Manager, authz Authorizer) *Server {
	return &Server{m: m, authz: authz, failedLog: kubeauth.NewSampler(), throttledLog: kubeauth.NewSampler()}
}

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

// Handler routes /healthz, /status, /metrics and /plugins/NAME/. Only /healthz, which says nothing
// but "ok", is open: the kubelet probes it without credentials.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /status", s.authorized(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		rep := StatusReport{Version: s.m.Version(), Config: s.config, Plugins: s.m.Statuses()}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	})))
	mux.Handle("GET /metrics", s.authorized(promhttp.HandlerFor(s.m.o.Metrics.Registry, promhttp.HandlerOpts{})))
	// Plugins come and go with reloads, and a ServeMux cannot unregister, so plugin routes are
	// looked up per request. The caller is authorised before the lookup, so that a 404 tells nobody
	// unauthenticated which plugins run.
	mux.Handle("/plugins/{name}/", s.authorized(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		p, ok := s.m.plugin(name)
		hp, serves := p.(HTTPPlugin)
		if !ok || !serves {
			http.Error(w, "no plugin "+name+" taking requests", http.StatusNotFound)
			return
		}
		http.StripPrefix("/plugins/"+name, hp.Handler()).ServeHTTP(w, r)
	})))
	return mux
}

// authorized serves next only to a caller whose bearer token the Authorizer accepts for the access
// the request asks for (the route's {name} is the plugin), with the caller's user name in the
// request's context and without the token: a plugin never sees, so never logs or stores, it.
func (s *Server) authorized(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := Access{Verb: "update", Plugin: r.PathValue("name")}
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			a.Verb = "get"
		}
		log := s.m.o.Logger.WithValues("method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		refuse := func(result string, code int, msg string) {
			s.m.o.Metrics.api.WithLabelValues(result).Inc()
			if code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="sidecar-agent"`)
			}
			http.Error(w, msg, code)
		}
		c := kubeauth.FromRequest(r)
		switch {
		case s.authz == nil:
			// Logged once per request at V(1): anything that reaches the port can make these.
			log.V(1).Info("API request refused: the agent runs without the Kubernetes API and authenticates nobody")
			refuse("unauthenticated", http.StatusUnauthorized, "the agent runs without the Kubernetes API and cannot authenticate callers; its API is closed")
			return
		case c.Token == "":
			log.V(1).Info("API request refused: no bearer token")
			refuse("unauthenticated", http.StatusUnauthorized, "a bearer token is required (Authorization: Bearer TOKEN)")
			return
		}
		user, err := s.authz.Authorize(r.Context(), c, a)
		var throttled *kubeauth.Throttled
		switch {
		case errors.Is(err, ErrUnauthenticated):
			log.V(1).Info("API request refused: token not accepted", "reason", err.Error())
			refuse("unauthenticated", http.StatusUnauthorized, "the bearer token is not accepted")
			return
		case errors.Is(err, ErrForbidden):
			log.Info("API request refused: caller not allowed", "user", user, "verb", a.Verb, "plugin", a.Plugin, "reason", err.Error())
			refuse("forbidden", http.StatusForbidden, err.Error())
			return
		case errors.As(err, &throttled):
			s.m.o.Metrics.throttled.WithLabelValues(throttled.Reason).Inc()
			s.throttledLog.Do(func(skipped int64) {
				log.Info("API request refused: too many new tokens to review", "reason", err.Error(), "skipped", skipped)
			})
			w.Header().Set("Retry-After", throttled.RetryAfterSeconds())
			refuse("throttled", http.StatusTooManyRequests, "too many new tokens to review; retry later")
			return
		case err != nil:
			s.failedLog.Do(func(skipped int64) {
				log.Error(err, "API request refused: the caller could not be authorised", "skipped", skipped)
			})
			refuse("error", http.StatusServiceUnavailable, "the caller could not be authorised; try again later")
			return
		}
		s.m.o.Metrics.api.WithLabelValues("allowed").Inc()
		r = r.Clone(WithCaller(r.Context(), user))
		r.Header.Del("Authorization")
		next.ServeHTTP(w, r)
	})
}
