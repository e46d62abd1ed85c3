package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecarops/sidecarops/internal/podwebhook"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/installview"
)

// installFlags say which installation's pod webhook the output accounts for: the API server never
// sends it a pod its namespace or object selector leaves out, so such a pod is created without
// sidecars whatever matches it.
type installFlags struct {
	values    string
	namespace string
	cluster   clusterFlags
}

func (f *installFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.values, "install-values", "", "values file of the sidecarops chart as installed (helm install -f FILE): its webhookConfiguration's excluded namespaces and selectors say which pods the pod webhook never sees")
	fs.StringVar(&f.namespace, "install-namespace", podwebhook.DefaultNamespace, "with --install-values, the release's namespace, which the pod webhook never sees")
	// Offline unless asked: $KUBECONFIG alone does not make these commands read a cluster.
	f.cluster.register(fs, "read the pod webhook's namespace and object selectors and match conditions from the cluster's MutatingWebhookConfiguration "+podwebhook.ConfigurationName+", and Namespaces' labels (read-only), with --kubeconfig or --context")
}

// view reads the installation named by the flags; without any, the one config/default installs.
// namespaces are the Namespaces of the input, whose labels the namespace selector is evaluated on;
// the view's notice goes to notices.
func (f *installFlags) view(ctx context.Context, namespaces []*corev1.Namespace, notices io.Writer) (*installview.View, error) {
	var (
		v   *installview.View
		err error
	)
	switch {
	case f.values != "" && f.cluster.given():
		return nil, usageError{errors.New("--install-values and --kubeconfig/--context: give one, not both")}
	case f.cluster.given():
		cfg, err := f.cluster.restConfig()
		if err != nil {
			return nil, err
		}
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.cluster, err)
		}
		v, err = installview.FromCluster(ctx, c, f.cluster.String())
		if err != nil {
			return nil, err
		}
	case f.values != "":
		v, err = installview.FromValues(f.values, f.namespace)
	default:
		v, err = installview.Default()
	}
	if err != nil {
		return nil, err
	}
	v.Known(namespaces, notices)
	return v, nil
}
