package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// env is one API server for all tests; each test works in its own namespace.
var (
	env   *envtest.Environment
	admin dynamic.Interface
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "test/agent: KUBEBUILDER_ASSETS is not set: run through `make test`, which builds kube-apiserver and etcd with `make envtest-bins`")
		return 1
	}
	env = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("testdata", "gameservers.yaml")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/agent: starting kube-apiserver and etcd:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "test/agent: stopping the control plane:", err)
		}
	}()
	if admin, err = dynamic.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The CRD is installed; wait until its resource is served before tests create GameServers.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		_, err := admin.Resource(gameServers).Namespace("default").List(ctx, listOne)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "test/agent: GameServer resource not served:", err)
			return 1
		}
		time.Sleep(100 * time.Millisecond)
	}
	return m.Run()
}
