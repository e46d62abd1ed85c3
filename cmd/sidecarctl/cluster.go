package main

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// clusterFlags say which cluster a command reads, as kubectl says it: the kubeconfig of
// --kubeconfig, else the files of $KUBECONFIG merged, else ~/.kube/config; its context --context,
// else its current context. client-go's loading rules do exactly this, so that sidecarctl reads
// the cluster kubectl would.
type clusterFlags struct {
	kubeconfig string
	context    string
}

// register adds --kubeconfig and --context; use says what the command reads from the cluster.
func (f *clusterFlags) register(fs *pflag.FlagSet, use string) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", use+"; the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, as kubectl)")
	fs.StringVar(&f.context, "context", "", "the kubeconfig context to use (default: its current context)")
}

// given reports whether a cluster was asked for by either flag.
func (f clusterFlags) given() bool {
	return f.kubeconfig != "" || f.context != ""
}

// String names the kubeconfig and context as given, for errors: "--kubeconfig FILE --context
// NAME", or what stands for them.
func (f clusterFlags) String() string {
	s := "--kubeconfig " + f.kubeconfig
	if f.kubeconfig == "" {
		s = "the kubeconfig of $KUBECONFIG or ~/.kube/config"
	}
	if f.context != "" {
		s += " --context " + f.context
	}
	return s
}

// restConfig is the client configuration of the cluster the flags name.
func (f clusterFlags) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f, err)
	}
	return cfg, nil
}

// client reads the cluster as the kubeconfig's user: SidecarSets in v1beta1, the version the API
// server stores, so that reading them needs no conversion webhook.
func (f clusterFlags) client() (client.Client, error) {
	cfg, err := f.restConfig()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), v1beta1.AddToScheme(scheme)); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f, err)
	}
	return c, nil
}
