package hostile

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/manager"
)

var cluster *devcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	cluster, err = devcluster.Start(ctx, devcluster.Options{Root: "../..", Manager: manager.Options{Debounce: 50 * time.Millisecond, RestartableInProcess: true}, LogToFile: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the cluster:", err)
		}
	}()
	return cluster.Report(m.Run())
}
