package manager

import (
	"errors"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	authzv1 "k8s.io/api/authorization/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sidecarops/sidecarops/controller"
	"github.com/sidecarops/sidecarops/internal/kubeauth"
	"github.com/sidecarops/sidecarops/internal/loader"
	"github.com/sidecarops/sidecarops/internal/promreg"
	"github.com/sidecarops/sidecarops/internal/version"
	"github.com/sidecarops/sidecarops/webhook"
)

// metricsFilter lets through to the metrics the callers the API server authenticates (a
// TokenReview of their bearer token) and authorizes for the request's path and verb (a
// SubjectAccessReview of a non-resource URL: GET /metrics, which the ClusterRole
// sidecarops-metrics-reader grants), as controller-runtime's filters.WithAuthenticationAndAuthorization
// does, with the same answers (401, 403, 500), and 429 past kubeauth's limits of reviews of new
// tokens. That one builds on the API server's own authenticator and authorizer packages, and with
// them CEL, gRPC and OpenTelemetry: a large part of the manager's executable and of its memory at start-up (docs/benchmarks.md,
// "Manager memory"), for two API calls that internal/kubeauth makes, and caches, for the agent
// already.
func metricsFilter(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	cfg = kubeauth.ClientConfig(cfg)
	authn, err := authenticationv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	return metricsFilterOf(kubeauth.NewReviewer(kubeauth.Options{Client: kubeauth.Clients{Authentication: authn, Authorization: authz}})), nil
}

func metricsFilterOf(r *kubeauth.Reviewer) metricsserver.Filter {
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		// Anyone reaching the port can make reviews fail or be throttled: logged sampled.
		failedLog, throttledLog := kubeauth.NewSampler(), kubeauth.NewSampler()
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			user, err := r.Review(req.Context(), kubeauth.FromRequest(req), kubeauth.Attributes{NonResource: &authzv1.NonResourceAttributes{
				Path: req.URL.Path, Verb: strings.ToLower(req.Method)}})
			var throttled *kubeauth.Throttled
			switch {
			case errors.Is(err, kubeauth.ErrUnauthenticated):
				log.V(4).Info("metrics request not authenticated", "reason", err.Error())
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
			case errors.Is(err, kubeauth.ErrForbidden):
				log.V(4).Info("metrics request not authorized", "reason", err.Error())
				http.Error(w, "Authorization denied for user "+user, http.StatusForbidden)
			case errors.As(err, &throttled):
				throttledLog.Do(func(skipped int64) {
					log.Info("metrics request throttled", "remote", req.RemoteAddr, "reason", err.Error(), "skipped", skipped)
				})
				w.Header().Set("Retry-After", throttled.RetryAfterSeconds())
				http.Error(w, "Too many new tokens to review", http.StatusTooManyRequests)
			case err != nil:
				failedLog.Do(func(skipped int64) {
					log.Error(err, "metrics request: the API server's review failed", "skipped", skipped)
				})
				http.Error(w, "Authentication or authorization failed", http.StatusInternalServerError)
			default:
				next.ServeHTTP(w, req)
			}
		}), nil
	}
}

// componentMetrics are the metrics of the components the manager builds, registered on one
// registry: every metric docs/operations.md lists (TestMetricsAreDocumented builds them the same way).
type componentMetrics struct {
	webhook    *webhook.Metrics
	controller *controller.Metrics
	loader     *loader.Metrics
}

func newComponentMetrics(reg prometheus.Registerer) (componentMetrics, error) {
	var m componentMetrics
	var err error
	if m.webhook, err = webhook.NewMetrics(reg); err != nil {
		return m, err
	}
	if m.controller, err = controller.NewMetrics(reg); err != nil {
		return m, err
	}
	if m.loader, err = loader.NewMetrics(reg); err != nil {
		return m, err
	}
	return m, registerBuildInfo(reg)
}

// registerBuildInfo exports sidecarops_build_info{version,commit,go_version,opa_version} 1, the
// usual way for dashboards to tell replicas of different builds apart.
func registerBuildInfo(reg prometheus.Registerer) error {
	info := version.Get()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sidecarops_build_info",
		Help: "The manager's build: version, commit, Go version and OPA version, as labels; always 1.",
	}, []string{"version", "commit", "go_version", "opa_version"})
	g, err := promreg.Register(reg, g)
	if err != nil {
		return err
	}
	g.WithLabelValues(info.Version, info.Commit, info.GoVersion, info.OPA).Set(1)
	return nil
}
