package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sidecarops/sidecarops/agent"
	"github.com/sidecarops/sidecarops/agent/plugins"
	"github.com/sidecarops/sidecarops/agent/storage"
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
	addr := fs.String("addr", ":5000", "address of /status, /healthz, /metrics and the plugins' endpoints")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; default: the pod's ServiceAccount (in-cluster)")
	noKube := fs.Bool("no-kube", false, "run without the Kubernetes API (storageConfig writes then fail and are reported)")
	reload := fs.Duration("reload-interval", 5*time.Second, "how often config.yaml is checked for changes")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	log := logr.FromSlogHandler(slog.NewJSONHandler(stderr, nil))
	self := storage.Self{PodName: os.Getenv("POD_NAME"), PodNamespace: os.Getenv("POD_NAMESPACE")}
	var kube *storage.Kube
	if !*noKube {
		var err error
		if kube, err = kubeClient(*kubeconfig, self); err != nil {
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
		ConfigPath:     *configPath, Listener: ln, ReloadInterval: *reload,
	})
	if err != nil {
		fmt.Fprintln(stderr, "sidecar-agent:", err)
		return 1
	}
	return 0
}

func kubeClient(kubeconfig string, self storage.Self) (*storage.Kube, error) {
	if self.PodName == "" || self.PodNamespace == "" {
		return nil, errors.New("POD_NAME and POD_NAMESPACE must be set (downward API fieldRefs metadata.name and metadata.namespace), or pass --no-kube")
	}
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	cfg.UserAgent = "sidecar-agent/" + agent.Version
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	return &storage.Kube{Client: dc, Self: self}, nil
}
