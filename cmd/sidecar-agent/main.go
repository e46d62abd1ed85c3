package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sidecarops/sidecarops/agent"
	"github.com/sidecarops/sidecarops/agent/auth"
	"github.com/sidecarops/sidecarops/agent/plugins"
	"github.com/sidecarops/sidecarops/agent/storage"
	"github.com/sidecarops/sidecarops/internal/kubeauth"
	"github.com/sidecarops/sidecarops/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("sidecar-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "/etc/sidecar-agent/config.yaml", "config.yaml (mounted from a ConfigMap; re-read when it changes)")
	// Loopback by default: only the pod's own containers reach the API unless the SidecarSet says
	// otherwise (it must for the kubelet's probe of /healthz and for callers outside the pod).
	addr := fs.String("addr", "127.0.0.1:5000", "address of /status, /healthz, /metrics and the plugins' endpoints; every endpoint but /healthz needs a bearer token")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; default: the pod's ServiceAccount (in-cluster)")
	noKube := fs.Bool("no-kube", false, "run without the Kubernetes API (storageConfig writes then fail and are reported)")
	reload := fs.Duration("reload-interval", 5*time.Second, "how often config.yaml is checked for changes")
	audience := fs.String("token-audience", "sidecar-agent", `audience callers' bearer tokens must be issued for ("" accepts the API server's own tokens, which the agent could then replay)`)
	printVersion := fs.Bool("version", false, "print the version, commit, Go and OPA versions, and exit")
	resource := fs.String("authz-resource", "sidecaragents.sidecarops.io", "RESOURCE.GROUP callers are authorised on, in the pod's namespace with the pod's name: get for /status and /metrics, get or update of subresource PLUGIN for /plugins/PLUGIN/")
	limits := kubeauth.DefaultLimits
	// Each allowance of reviews (kubeauth.Limits) is a rate and a burst: --NAME-rate and --NAME-burst.
	allowances := []struct {
		name  string
		rate  *rate.Limit
		burst *int
		what  string
	}{
		{"review-source", &limits.PerSource, &limits.PerSourceBurst, "first reviews of callers' tokens and access one source (an IPv4 address, an IPv6 /64) may have asked"},
		{"review", &limits.Global, &limits.GlobalBurst, "first reviews of all sources together"},
		{"review-reserved", &limits.Reserved, &limits.ReservedBurst, "first reviews, beyond --review-rate's, of sources none of whose requests was refused lately"},
		{"review-known", &limits.Known, &limits.KnownBurst, "re-reviews of tokens and access the API server allowed, before they spend the others"},
	}
	for _, a := range allowances {
		fs.Float64Var((*float64)(a.rate), a.name+"-rate", float64(*a.rate), a.what+", per second")
		fs.IntVar(a.burst, a.name+"-burst", *a.burst, a.what+", at once")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *printVersion {
		fmt.Fprintln(fs.Output(), version.Get().String("sidecar-agent"))
		return 0
	}
	gr := schema.ParseGroupResource(*resource)
	if gr.Resource == "" {
		fmt.Fprintf(fs.Output(), "invalid value %q for flag -authz-resource: want RESOURCE.GROUP, e.g. sidecaragents.sidecarops.io\n", *resource)
		return 2
	}
	for _, a := range allowances {
		if r := float64(*a.rate); !(r > 0) || math.IsInf(r, 1) {
			fmt.Fprintf(fs.Output(), "invalid value %v for flag -%s-rate: must be a positive number\n", r, a.name)
			return 2
		}
		if *a.burst <= 0 {
			fmt.Fprintf(fs.Output(), "invalid value %d for flag -%s-burst: must be positive\n", *a.burst, a.name)
			return 2
		}
	}
	var audiences []string
	if *audience != "" {
		audiences = []string{*audience}
	}
	log := logr.FromSlogHandler(slog.NewJSONHandler(stderr, nil))
	self := storage.Self{PodName: os.Getenv("POD_NAME"), PodNamespace: os.Getenv("POD_NAMESPACE")}
	var kube *storage.Kube
	// Without API access nobody can be authenticated, and the API stays closed (agent.Run).
	var authz agent.Authorizer
	if !*noKube {
		var err error
		if kube, authz, err = kubeClients(*kubeconfig, self, auth.Options{Self: self, Audiences: audiences, Resource: gr, Limits: limits}); err != nil {
			fmt.Fprintln(stderr, "sidecar-agent:", err)
			return 1
		}
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "sidecar-agent:", err)
		return 1
	}
	err = agent.Run(ctx, agent.RunOptions{
		ManagerOptions: agent.ManagerOptions{Registry: plugins.Builtin(), Logger: log, Self: self, Kube: kube},
		ConfigPath:     *configPath, Listener: ln, ReloadInterval: *reload, Authorizer: authz,
	})
	if err != nil {
		fmt.Fprintln(stderr, "sidecar-agent:", err)
		return 1
	}
	return 0
}

// kubeClients are the agent's API access: the storage of results, and the reviews authorising the
// API's callers, each through a client of its own: the results' writes keep client-go's rate
// limiter to themselves, and the reviews have none but the Reviewer's limits, which refuse rather
// than queue (kubeauth.ClientConfig), so callers with made-up tokens delay neither the writes nor
// the reviews of other callers.
func kubeClients(kubeconfig string, self storage.Self, o auth.Options) (*storage.Kube, *auth.Reviewer, error) {
	if self.PodName == "" || self.PodNamespace == "" {
		return nil, nil, errors.New("POD_NAME and POD_NAMESPACE must be set (downward API fieldRefs metadata.name and metadata.namespace), or pass --no-kube")
	}
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	cfg.UserAgent = "sidecar-agent/" + agent.Version
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	if o.Client, err = kubernetes.NewForConfig(kubeauth.ClientConfig(cfg)); err != nil {
		return nil, nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	return &storage.Kube{Client: dc, Self: self}, auth.NewReviewer(o), nil
}
