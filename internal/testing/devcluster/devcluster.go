package devcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sidecarops/sidecarops/internal/testing/testfiles"
	"github.com/sidecarops/sidecarops/manager"
)

// Namespace is where the manager "runs": ControllerRevisions, the whitelist ConfigMap, Events.
const Namespace = "sidecarops-system"

// Cluster is a running local control plane with the manager serving its webhooks.
type Cluster struct {
	Env    *envtest.Environment
	Config *rest.Config
	Client client.Client
	// Kubeconfig is a kubeconfig file for kubectl.
	Kubeconfig string
	// Manager are the options the manager was started with.
	Manager manager.Options

	cancel     context.CancelFunc
	done       chan error
	managerLog string
}

// Options configure Start.
type Options struct {
	// Root is the repository root (config/crd and config/webhook are read from it).
	Root string
	// Manager options; addresses, certificates and namespace are filled in by Start.
	Manager manager.Options
	// SkipWebhookConfigurations installs no webhook configuration through envtest (the API server
	// never calls the manager).
	SkipWebhookConfigurations bool
	// BeforeManager runs after the control plane is up, before the manager starts, with the options
	// the manager will get.
	BeforeManager func(client.Client, manager.Options) error
	// SelfManagedCerts runs the manager with its own certificate rotation (cert-controller) in a
	// fresh directory instead of envtest's certificate.
	SelfManagedCerts bool
	// LogToFile sends controller-runtime's log — the in-process manager's — to a temporary file,
	// whose end Report prints when a suite fails. A process sets that logger once: a caller with a
	// logger of its own leaves this false.
	LogToFile bool
}

// Start boots etcd and kube-apiserver, installs the CRD and the webhook configurations (rewritten
// by envtest to call this process over TLS with its own CA), and starts the manager. It returns once
// the manager reports ready: webhook server up and first policy snapshot compiled.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, errors.New("devcluster: KUBEBUILDER_ASSETS is not set: run through `make test`/`make demo`, which build kube-apiserver and etcd with `make envtest-bins`")
	}
	scheme, err := manager.Scheme()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(o.Root, "config", "crd")},
		ErrorIfCRDPathMissing: true,
		// With the scheme's convertible SidecarSet, envtest points the CRD's conversion webhook at
		// the manager's /convert, as config/crd/patches/conversion.yaml does in a cluster.
		CRDInstallOptions: envtest.CRDInstallOptions{Scheme: scheme},
	}
	if !o.SkipWebhookConfigurations {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: []string{filepath.Join(o.Root, "config", "webhook")}}
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("devcluster: starting kube-apiserver and etcd: %w", err)
	}
	c := &Cluster{Env: env, Config: cfg}
	fail := func(err error) (*Cluster, error) {
		_ = c.Stop()
		return nil, err
	}
	if o.LogToFile {
		// Without a logger the manager's errors would be lost, which controller-runtime reports
		// with a stack trace in the middle of the test output.
		f, err := os.CreateTemp("", "sidecarops-manager-*.log")
		if err != nil {
			return fail(err)
		}
		c.managerLog = f.Name()
		ctrl.SetLogger(zap.New(zap.WriteTo(f)))
	}
	if c.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return fail(err)
	}
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil {
		return fail(fmt.Errorf("devcluster: creating namespace %s: %w", Namespace, err))
	}
	if c.Kubeconfig, err = writeKubeconfig(env.KubeConfig); err != nil {
		return fail(err)
	}

	mo := o.Manager
	mo.Namespace = Namespace
	mo.CertMode = manager.CertExternal
	wio := &env.WebhookInstallOptions
	if o.SkipWebhookConfigurations && len(wio.LocalServingCAData) == 0 {
		// No API server calls the admission webhooks; the server still needs somewhere to listen
		// and a certificate. envtest made them already when it pointed the CRD's conversion at
		// this process: making new ones would leave the CRD trusting a CA nobody serves.
		if err := wio.PrepWithoutInstalling(); err != nil {
			return fail(err)
		}
	}
	mo.WebhookHost, mo.WebhookPort, mo.CertDir = wio.LocalServingHost, wio.LocalServingPort, wio.LocalServingCertDir
	if o.SelfManagedCerts {
		mo.CertMode = manager.CertSelf
		if mo.CertDir, err = os.MkdirTemp("", "sidecarops-certs-"); err != nil {
			return fail(err)
		}
	}
	if mo.MetricsAddr == "" {
		mo.MetricsAddr = "0"
	}
	if mo.StatusRecountInterval == 0 {
		// Often enough that every test's SidecarSets are counted in full and checked against the
		// counts kept from pod events (RecountDifferences).
		mo.StatusRecountInterval = 2 * time.Second
	}
	if mo.ProbeAddr == "" {
		if mo.ProbeAddr, err = FreeAddr(); err != nil {
			return fail(err)
		}
	}
	c.Manager = mo
	if o.BeforeManager != nil {
		if err := o.BeforeManager(c.Client, mo); err != nil {
			return fail(err)
		}
	}
	if err := c.startManager(ctx); err != nil {
		return fail(err)
	}
	return c, nil
}

// startManager starts a manager with c.Manager's options and waits until it is ready.
func (c *Cluster) startManager(ctx context.Context) error {
	mgr, err := manager.New(c.Config, c.Manager)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.done = make(chan error, 1)
	go func() { c.done <- mgr.Start(runCtx) }()
	return c.WaitReady(ctx, 2*time.Minute)
}

// stopManager stops the running manager and waits for it to return.
func (c *Cluster) stopManager() error {
	if c.cancel == nil {
		return nil
	}
	c.cancel()
	c.cancel = nil
	select {
	case err := <-c.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("devcluster: manager did not stop within 30s")
	}
}

// RestartManager stops the manager (if one runs in-process) and starts a new one in-process with
// the same options, as a crashed or rescheduled manager Pod would come back: everything it knew
// lived in memory (caches, expectations, work queues) and is rebuilt from the API server.
func (c *Cluster) RestartManager(ctx context.Context) error {
	if err := c.stopManager(); err != nil {
		return err
	}
	return c.startManager(ctx)
}

// WaitReady polls the manager's /readyz until it answers 200 (or the manager exits).
func (c *Cluster) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	url := "http://" + c.Manager.ProbeAddr + "/readyz"
	for {
		select {
		case err := <-c.done:
			c.done <- err
			return fmt.Errorf("devcluster: manager stopped before it was ready: %w", err)
		default:
		}
		if ok, _ := httpOK(ctx, url); ok {
			return c.webhookServing()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("devcluster: manager not ready after %s (%s)", timeout, url)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// webhookServing checks the webhook server completes a TLS handshake with the certificate envtest
// made, so the API server's first admission call does not race the listener.
func (c *Cluster) webhookServing() error {
	addr := net.JoinHostPort(c.Manager.WebhookHost, strconv.Itoa(c.Manager.WebhookPort))
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // #nosec G402 -- a liveness probe, not trust
	if err != nil {
		return fmt.Errorf("devcluster: webhook server %s: %w", addr, err)
	}
	return conn.Close()
}

// Stop stops the manager, then the control plane.
func (c *Cluster) Stop() error {
	var errs []error
	if err := c.stopManager(); err != nil {
		errs = append(errs, err)
	}
	if c.Kubeconfig != "" {
		_ = os.RemoveAll(filepath.Dir(c.Kubeconfig))
	}
	if err := c.Env.Stop(); err != nil {
		errs = append(errs, err)
	}
	if c.managerLog != "" {
		// The logger may still write to the file; on Linux it goes on to an unlinked file.
		_ = os.Remove(c.managerLog)
	}
	return errors.Join(errs...)
}

// Report passes a suite's exit code through, printing the last 8 KiB of the in-process manager's
// log (Options.LogToFile) when it says the suite failed.
func (c *Cluster) Report(code int) int {
	if code != 0 && c.managerLog != "" {
		fmt.Fprintf(os.Stderr, "the in-process manager's log (tail):\n%s\n", testfiles.Tail(c.managerLog, 8192))
	}
	return code
}

// RecountDifferences is what the in-process managers' controllers found wrong in the SidecarSet
// status counts they keep from pod events (sidecarops_controller_status_recount_differences_total):
// a suite's TestMain fails when it is not zero.
func RecountDifferences() (float64, error) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0, err
	}
	for _, f := range families {
		if f.GetName() == "sidecarops_controller_status_recount_differences_total" {
			var sum float64
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum, nil
		}
	}
	return 0, errors.New("devcluster: no sidecarops_controller_status_recount_differences_total: no controller ran in this process")
}

// CheckRecount turns a suite's exit code into a failure when RecountDifferences is not zero, saying so.
func CheckRecount(code int) int {
	n, err := RecountDifferences()
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		return 1
	case n > 0:
		fmt.Fprintf(os.Stderr, "the controller's status counts kept from pod events were wrong for %v pods (sidecarops_controller_status_recount_differences_total)\n", n)
		return 1
	}
	return code
}
