package governance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/manager"
)

var cluster *devcluster.Cluster

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	examples, err := filepath.Abs("../../examples/policies")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, err = devcluster.Start(ctx, devcluster.Options{Root: "../..", Manager: manager.Options{
		Bundles:            []string{examples},
		BundlePollInterval: time.Second,
		Debounce:           50 * time.Millisecond,
	}, LogToFile: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := cluster.Report(m.Run())
	if err := cluster.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the cluster:", err)
		return 1
	}
	return code
}
