package rollout

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/internal/testing/kwok"
	"github.com/sidecarops/sidecarops/manager"
)

// imageChangeDelay is how long kwok takes to report a changed image: long enough that a watch sees
// every upgraded pod in its unavailable phase, short enough for quick rollouts.
const imageChangeDelay = 400 * time.Millisecond

var (
	cluster *devcluster.Cluster
	kw      *kwok.Kwok
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	opts := manager.Options{Debounce: 50 * time.Millisecond, RestartableInProcess: true}
	if benchmarking() {
		// The production default: a benchmark measures what a pod event costs, not the check.
		opts.StatusRecountInterval = 5 * time.Minute
	}
	cluster, err = devcluster.Start(ctx, devcluster.Options{Root: "../..", Manager: opts, LogToFile: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the cluster:", err)
		}
	}()
	delay := imageChangeDelay
	if benchmarking() {
		// Benchmarks time rollouts against a floor; a restart delay would only add a constant.
		delay = 0
	}
	kw, err = kwok.Start(ctx, kwok.Options{KubeconfigPath: cluster.Kubeconfig, ImageChangeDelay: delay})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := cluster.Report(devcluster.CheckRecount(m.Run()))
	if code != 0 {
		fmt.Fprintf(os.Stderr, "kwok output (tail):\n%s\n", kw.Logs())
	}
	if err := kw.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping kwok:", err)
		return 1
	}
	return code
}

// benchmarking reports whether this run runs benchmarks (go test -bench).
func benchmarking() bool {
	f := flag.Lookup("test.bench")
	return f != nil && f.Value.String() != ""
}
