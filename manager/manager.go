package manager

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	crconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/controller"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/coexist"
	"github.com/sidecarops/sidecarops/internal/impact"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/loader"
	"github.com/sidecarops/sidecarops/internal/podwebhook"
	"github.com/sidecarops/sidecarops/webhook"
	"github.com/sidecarops/sidecarops/webhook/prefilter"
)

// Certificate modes.
const (
	// CertSelf: certificates are generated and rotated by the manager (cert-controller), stored in a
	// Secret, and their CA injected into the webhook configurations.
	CertSelf = "self"
	// CertExternal: certificates are provided in CertDir (cert-manager, or envtest in tests).
	CertExternal = "external"
)

// Names the installation manifests in config/ use.
const (
	// WebhookConfigurationName and PodWebhookName are internal/podwebhook's, which sidecarctl
	// shares without linking the manager; kept here for the tests and tools that drive a manager.
	WebhookConfigurationName = podwebhook.ConfigurationName
	// PodWebhookName is the pod webhook's name in WebhookConfigurationName.
	PodWebhookName   = podwebhook.WebhookName
	CertSecretName   = "sidecarops-webhook-cert" //nolint:gosec // G101: the name of the Secret holding the webhook certificate, not a credential
	ServiceName      = "sidecarops-webhook"
	LeaderElectionID = "sidecarops-manager.sidecarops.io"
	// CRDName is the SidecarSet CRD, whose conversion webhook the manager serves.
	CRDName = "sidecarsets.apps.kruise.io"
)

// Options configure the manager; cmd/sidecarops-manager fills them from flags.
type Options struct {
	// Namespace is the manager's own namespace (the kruise-configuration ConfigMap, the certificate
	// Secret, the leader election lease, and ControllerRevisions unless RevisionNamespace is set).
	// Required.
	Namespace string
	// RevisionNamespace holds the SidecarSets' ControllerRevisions (default Namespace); kruise-system
	// keeps an OpenKruise's history when taking it over. The manager then needs, there, the
	// ControllerRevision rights its Role grants in Namespace.
	RevisionNamespace string
	// ConfigurationNamespace holds the kruise-configuration ConfigMap, the whitelist (default
	// Namespace): kruise-system reads the one an OpenKruise being taken over left there. The manager
	// then needs, there, the ConfigMap rights its Role grants in Namespace.
	ConfigurationNamespace string
	// OpenKruiseKept runs the manager next to an OpenKruise kept for its other workloads (migration
	// path B, decision D10): the pod webhook answers after OpenKruise's (webhook.PodInjector's
	// AfterOpenKruise), the SidecarSet CRD's conversion is left to OpenKruise's webhook, and
	// OpenKruise's own SidecarSet webhooks are kept out of its webhook configurations
	// (package coexist).
	OpenKruiseKept bool
	// PodName and PodUID name this replica's Pod for Events (downward API); optional.
	PodName string
	PodUID  types.UID

	WebhookHost string
	WebhookPort int
	// EnableHTTP2 lets the webhook server speak HTTP/2. Off by default, as kubebuilder projects
	// have it since CVE-2023-44487 (HTTP/2 rapid reset); it is also slower here: Go's HTTP/2
	// server hands every request's body and response through one goroutine per connection, which
	// on a busy node adds scheduling delay to the tail (docs/benchmarks.md).
	EnableHTTP2 bool
	// FailOpen admits pods unchanged, with a warning, while this replica has no policy snapshot
	// yet, instead of answering 503 (config/components/fail-open sets it with failurePolicy Ignore).
	FailOpen bool
	// WebhookLimits bound what a peer of the webhook port can make the server hold (webhook.Limits:
	// bytes of admissions in flight, how long a request body may take; zero fields: the defaults).
	WebhookLimits webhook.Limits
	CertDir       string
	CertMode      string // CertSelf or CertExternal

	MetricsAddr string // "0" disables
	// InsecureMetrics serves the metrics over plain HTTP without authentication; by default they
	// are HTTPS, and only for callers allowed GET /metrics (metricsOptions).
	InsecureMetrics bool
	ProbeAddr       string // "0" disables
	// PprofAddr serves Go's profiles (net/http/pprof) for diagnosing the manager; "" or "0" (the
	// default) disables it. The profiles are served without authentication, so only a loopback
	// address is accepted (reach it with kubectl port-forward).
	PprofAddr string
	// LeaderElection makes only the elected replica run the SidecarSet controller; webhooks and
	// the policy loader run on every replica regardless.
	LeaderElection bool
	// LeaseDuration, RenewDeadline and RetryPeriod tune the leader election (zero: controller-runtime's
	// 15s, 10s and 2s). The lease is released when the manager stops, so a rolling update hands over
	// at once; these bound the hand-over only when a leader dies without stopping.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// GracefulShutdownTimeout bounds how long the manager waits for its runnables to stop (zero:
	// controller-runtime's 30s).
	GracefulShutdownTimeout time.Duration
	// RestartableInProcess lets one process start managers more than once (devcluster's
	// RestartManager): controller-runtime otherwise refuses a second controller of the same name.
	RestartableInProcess bool
	// StatusRecountInterval is how often the controller counts a SidecarSet's pods in full while it
	// keeps the status from pod events, and checks the two agree (zero: 5 minutes).
	StatusRecountInterval time.Duration
	// SidecarSetWorkers is the number of SidecarSets reconciled at once (default 3, OpenKruise's
	// --sidecarset-workers); a negative value disables the controller (a webhook-only replica).
	SidecarSetWorkers int
	// NoPodWebhookPrefilter sends every pod to the pod webhook (removing the condition an earlier
	// run left). Otherwise the elected replica keeps a match condition on the pod webhook's
	// registration (package prefilter), so the API server calls it only for pods some SidecarSet
	// may inject into.
	NoPodWebhookPrefilter bool

	// Bundles are administrators' bundle files or directories; BundleURLs are OPA bundle services,
	// each the full URL of a bundle (e.g. https://bundles.example.com/gates.tar.gz).
	Bundles    []string
	BundleURLs []string
	// BundlePollInterval is how often files are checked; HTTP services are polled between
	// BundlePollInterval and twice it (OPA's jitter).
	BundlePollInterval time.Duration
	// BundleDownloadTimeout bounds one download from a bundle service, body included (0: 60s).
	BundleDownloadTimeout time.Duration
	// BundleLimits bound each administrators' bundle: its archive as downloaded or read, each file
	// and the whole bundle decompressed (zero fields: bundles' defaults).
	BundleLimits bundles.Limits
	// VerificationKeys (PEM public key files) make every administrators' bundle require a valid
	// signature; VerificationAlg defaults to RS256.
	VerificationKeys  []string
	VerificationAlg   string
	VerificationScope string
	// BundlePersistDir keeps each source's last good bundle so a restart serves it even when the
	// source is unreachable.
	BundlePersistDir string

	// DefaultsAllowed is the SidecarSetPatchPodMetadataDefaultsAllowed feature gate.
	DefaultsAllowed bool
	// Debounce is the quiet period before recompiling after a change (0: the loader's default).
	Debounce time.Duration
	// DecisionLog writes one log line per pod admission.
	DecisionLog bool
	// NoInjectionCache turns off the pod webhook's per-pod cache (webhook.PodInjector.NoInjectionCache).
	NoInjectionCache bool
}

// Scheme holds the types the manager reads and serves.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	// Both versions, for the conversion webhook; everything else reads and writes v1beta1, the
	// storage version, so the manager never needs its own conversion webhook to start.
	if err := v1beta1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// New assembles the manager. Nothing runs until the returned manager is started.
func New(cfg *rest.Config, o Options) (ctrlmanager.Manager, error) {
	if o.Namespace == "" {
		return nil, errors.New("manager: Options.Namespace is required")
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	revisions := cmp.Or(o.RevisionNamespace, o.Namespace)
	configuration := cmp.Or(o.ConfigurationNamespace, o.Namespace)
	byObject := loader.CacheByObject(configuration, revisions)
	// The certificate rotator reads only its own Secret.
	byObject[&corev1.Secret{}] = cache.ByObject{Namespaces: map[string]cache.Config{o.Namespace: {}}}
	maps.Copy(byObject, prefilter.CacheByObject(WebhookConfigurationName))

	m, err := newComponentMetrics(metrics.Registry)
	if err != nil {
		return nil, err
	}
	server := webhook.NewServer(webhook.ServerOptions{
		Host:           o.WebhookHost,
		Port:           o.WebhookPort,
		CertDir:        o.CertDir,
		TLSOpts:        []func(*tls.Config){webhook.TLSOptions(o.EnableHTTP2)},
		MaxConnections: o.WebhookLimits.MaxConnections,
		Metrics:        m.webhook,
	})
	// Uncompressed: the manager reads every pod's watch events, and gzip on both ends cost the
	// manager more CPU during a scale-up than its controller did (docs/benchmarks.md, "Scale-up of
	// 5,000 pods"); it runs beside the API server, where bandwidth is not what is short.
	pprofAddr, err := loopbackOnly(o.PprofAddr)
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.DisableCompression = true
	pods := controller.NewPods()
	mgr, err := ctrl.NewManager(cfg, ctrlmanager.Options{
		Scheme: scheme,
		// The controller caches every pod, as compact records of what it reads
		// (controller.Pods); nothing reads managedFields, which are often the larger part of
		// an object.
		Cache: cache.Options{ByObject: byObject, DefaultTransform: cache.TransformStripManagedFields(),
			NewInformer: pods.NewInformer},
		Metrics:                 metricsOptions(o),
		HealthProbeBindAddress:  o.ProbeAddr,
		PprofBindAddress:        pprofAddr,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: o.Namespace,
		// The lease is given up when the manager stops: the next leader takes over at once instead
		// of after LeaseDuration. Safe because nothing runs after the manager's Start returns.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 nonZero(o.LeaseDuration),
		RenewDeadline:                 nonZero(o.RenewDeadline),
		RetryPeriod:                   nonZero(o.RetryPeriod),
		GracefulShutdownTimeout:       nonZero(o.GracefulShutdownTimeout),
		Controller:                    ctrlconfig.Controller{SkipNameValidation: &o.RestartableInProcess},
	})
	if err != nil {
		return nil, err
	}

	var eng engine.Engine
	st, err := loader.New(&eng, loader.Options{Debounce: o.Debounce, DefaultsAllowed: o.DefaultsAllowed, Metrics: m.loader})
	if err != nil {
		return nil, err
	}
	if err := loader.SetupWithManager(mgr, st, loader.ManagerOptions{Namespace: o.Namespace, RevisionNamespace: revisions, ConfigurationNamespace: configuration, PodName: o.PodName, PodUID: o.PodUID, Lease: LeaderElectionID}); err != nil {
		return nil, err
	}
	if err := addBundleSources(mgr, st, o); err != nil {
		return nil, err
	}

	decisionLog := logr.Discard()
	if o.DecisionLog {
		decisionLog = ctrl.Log.WithName("decision")
	}
	handlers := webhook.NewHandlers(&eng, m.webhook, decisionLog)
	handlers.Limits = o.WebhookLimits
	handlers.PodInjector.FailOpen = o.FailOpen
	handlers.PodInjector.NoInjectionCache = o.NoInjectionCache
	handlers.PodInjector.AfterOpenKruise = o.OpenKruiseKept
	handlers.Converter = crconversion.NewWebhookHandler(mgr.GetScheme(), mgr.GetConverterRegistry())
	if !o.NoPodWebhookPrefilter {
		handlers.Validator.Prefilter = &prefilter.Widener{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(), Configuration: WebhookConfigurationName, Webhook: PodWebhookName}
	}
	if err := addClusterView(mgr, handlers); err != nil {
		return nil, err
	}
	webhook.Register(server, handlers)

	if err := addWebhookServer(mgr, server, o); err != nil {
		return nil, err
	}
	if o.SidecarSetWorkers >= 0 {
		r := &controller.Reconciler{
			Client:    mgr.GetClient(),
			APIReader: mgr.GetAPIReader(),
			Namespace: revisions,
			Recorder:  mgr.GetEventRecorder(controller.Name + "-controller"),
			Conflicts: &injector.ConflictFinder{Snapshots: &eng},
			// Zero: the controller's default.
			RecountInterval: o.StatusRecountInterval,
			Metrics:         m.controller,
			Pods:            pods,
		}
		if err := r.SetupWithManager(mgr, o.SidecarSetWorkers); err != nil {
			return nil, err
		}
	}
	if o.OpenKruiseKept {
		if err := (&coexist.WebhookKeeper{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
			return nil, err
		}
	}
	pf := &prefilter.Reconciler{Client: mgr.GetClient(), Configuration: WebhookConfigurationName, Webhook: PodWebhookName, Unfiltered: o.NoPodWebhookPrefilter}
	if err := pf.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}

// addWebhookServer starts the webhook server on every replica once its certificate exists, and
// makes readiness wait for it.
func addWebhookServer(mgr ctrlmanager.Manager, server crwebhook.Server, o Options) error {
	if err := mgr.AddReadyzCheck("webhook", server.StartedChecker()); err != nil {
		return err
	}
	switch o.CertMode {
	case CertExternal, "":
		return mgr.Add(server)
	case CertSelf:
	default:
		return fmt.Errorf("manager: unknown certificate mode %q (want %s or %s)", o.CertMode, CertSelf, CertExternal)
	}
	certsReady := make(chan struct{})
	err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: o.Namespace, Name: CertSecretName},
		CertDir:        o.CertDir,
		CAName:         "sidecarops-ca",
		CAOrganization: "sidecarops",
		DNSName:        fmt.Sprintf("%s.%s.svc", ServiceName, o.Namespace),
		ExtraDNSNames:  []string{fmt.Sprintf("%s.%s.svc.cluster.local", ServiceName, o.Namespace)},
		IsReady:        certsReady,
		Webhooks:       rotated(o),
		// Every replica serves the webhooks, so every replica needs the certificate on disk.
		RequireLeaderElection: false,
	})
	if err != nil {
		return err
	}
	return mgr.Add(afterCerts{server: server, ready: certsReady})
}

// rotated are the registrations the certificate rotator writes its CA into. Next to a kept
// OpenKruise the SidecarSet CRD's conversion is OpenKruise's, which its manager rewrites at every
// certificate sync: sidecarops leaves it alone rather than fight over it (decision D10).
func rotated(o Options) []rotator.WebhookInfo {
	hooks := []rotator.WebhookInfo{
		{Name: WebhookConfigurationName, Type: rotator.Mutating},
		{Name: WebhookConfigurationName, Type: rotator.Validating},
	}
	if !o.OpenKruiseKept {
		hooks = append(hooks, rotator.WebhookInfo{Name: CRDName, Type: rotator.CRDConversion})
	}
	return hooks
}

// afterCerts starts the webhook server once the rotator has written its certificate: the server
// loads the files when it starts.
type afterCerts struct {
	server crwebhook.Server
	ready  <-chan struct{}
}

func (a afterCerts) NeedLeaderElection() bool { return false }

func (a afterCerts) Start(ctx context.Context) error {
	select {
	case <-a.ready:
		return a.server.Start(ctx)
	case <-ctx.Done():
		return nil
	}
}

// addBundleSources registers every administrators' bundle source with the loader.
func addBundleSources(mgr ctrlmanager.Manager, st *loader.Loader, o Options) error {
	var v *bundles.Verification
	if len(o.VerificationKeys) > 0 {
		var err error
		if v, err = bundles.LoadVerificationKeys(o.VerificationKeys, o.VerificationAlg, o.VerificationScope); err != nil {
			return err
		}
	}
	for i, p := range o.Bundles {
		src, err := loader.NewFileSource(st, loader.FileOptions{
			Name: sourceName("file", i, filepath.Base(p)), Path: p, Interval: o.BundlePollInterval,
			Verification: v, Limits: o.BundleLimits, PersistDir: o.BundlePersistDir,
		})
		if err != nil {
			return err
		}
		if err := mgr.Add(src); err != nil {
			return err
		}
	}
	for i, raw := range o.BundleURLs {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme == "" || u.Host == "" || strings.Trim(u.Path, "/") == "" {
			return fmt.Errorf("manager: bundle URL %q: want scheme://host/path/to/bundle.tar.gz", raw)
		}
		resource := strings.TrimPrefix(u.Path, "/")
		if u.RawQuery != "" {
			resource += "?" + u.RawQuery
		}
		src, err := loader.NewHTTPSource(st, loader.HTTPOptions{
			Name: sourceName("http", i, u.Host), URL: u.Scheme + "://" + u.Host, Resource: resource,
			MinDelay: o.BundlePollInterval, MaxDelay: 2 * o.BundlePollInterval, Timeout: o.BundleDownloadTimeout,
			Verification: v, Limits: o.BundleLimits, PersistDir: o.BundlePersistDir,
		})
		if err != nil {
			return err
		}
		if err := mgr.Add(src); err != nil {
			return err
		}
	}
	return nil
}

// sourceName is stable across restarts (it names the persistence directory) and readable in metrics.
func sourceName(kind string, i int, hint string) string {
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '-'
	}, hint)
	return fmt.Sprintf("%s-%d-%s", kind, i, clean)
}

// metricsOptions serves the metrics over HTTPS to callers the API server authenticates
// (TokenReview) and authorizes (SubjectAccessReview for GET /metrics, granted by the ClusterRole
// sidecarops-metrics-reader): metricsFilter. With external certificates (cert-manager) the
// metrics port serves the webhook's certificate, which exists before the manager starts, so a
// scraper can verify it against the issuer's CA; with its own (CertSelf) the rotator writes them
// only after the server has started, so the port keeps controller-runtime's self-signed one.
// InsecureMetrics serves plain HTTP to anyone.
func metricsOptions(o Options) metricsserver.Options {
	if o.InsecureMetrics {
		return metricsserver.Options{BindAddress: o.MetricsAddr}
	}
	opts := metricsserver.Options{BindAddress: o.MetricsAddr, SecureServing: true,
		FilterProvider: metricsFilter,
		TLSOpts:        []func(*tls.Config){webhook.TLSOptions(false)}}
	if o.CertMode == CertExternal || o.CertMode == "" {
		opts.CertDir = o.CertDir
	}
	return opts
}

// nonZero is d, or nil (controller-runtime's default) when d is zero.
func nonZero(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}

// loopbackOnly checks the profiles' address: "" or "0" disables them (""), anything else must be
// a loopback host and a port, since net/http/pprof has no authentication.
func loopbackOnly(addr string) (string, error) {
	if addr == "" || addr == "0" {
		return "", nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err == nil {
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			err = errors.New("profiles are served without authentication: the host must be a loopback address (127.0.0.1, [::1] or localhost)")
		}
	}
	if err != nil {
		return "", fmt.Errorf("--pprof-bind-address %q: %w", addr, err)
	}
	return addr, nil
}

// addClusterView gives the webhooks what they read of the cluster beyond the policy state, from the
// manager's informers on every replica: the namespaces and a census of the pods for the SidecarSet
// policies' impact view, and the namespaces' Pod Security levels for the pod webhook.
func addClusterView(mgr ctrlmanager.Manager, h webhook.Handlers) error {
	ctx := context.Background()
	namespaces, census := impact.NewNamespaces(), impact.NewCensus()
	for _, w := range []struct {
		obj     client.Object
		handler toolscache.ResourceEventHandler
	}{{&corev1.Namespace{}, namespaces}, {&corev1.Pod{}, census}} {
		inf, err := mgr.GetCache().GetInformer(ctx, w.obj)
		if err != nil {
			return fmt.Errorf("informer for %T: %w", w.obj, err)
		}
		if _, err := inf.AddEventHandler(w.handler); err != nil {
			return fmt.Errorf("handler for %T: %w", w.obj, err)
		}
	}
	h.Validator.Impacts = impact.Over{Namespaces: namespaces, Pods: census}
	h.PodInjector.PodSecurity = &webhook.PodSecurity{Namespaces: namespaces, Recorder: mgr.GetEventRecorder("sidecarops-webhook")}
	return nil
}
