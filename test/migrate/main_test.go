package migrate

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/internal/testing/kwok"
	"github.com/sidecarops/sidecarops/manager"
)

var (
	cluster *devcluster.Cluster
	kw      *kwok.Kwok
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	// Before the takeover sidecarops is not there: the API server calls no webhook of it and no
	// controller of it runs (the manager process serves nothing anyone asks for).
	cluster, err = devcluster.Start(ctx, devcluster.Options{Root: "../..", SkipWebhookConfigurations: true, Manager: manager.Options{
		Debounce:              50 * time.Millisecond,
		RestartableInProcess:  true,
		SidecarSetWorkers:     -1,
		NoPodWebhookPrefilter: true,
	}, LogToFile: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the cluster:", err)
		}
	}()
	kw, err = kwok.Start(ctx, kwok.Options{KubeconfigPath: cluster.Kubeconfig, ImageChangeDelay: 200 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := cluster.Report(m.Run())
	if err := kw.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping kwok:", err)
		return 1
	}
	return code
}
