package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/internal/version"
	"github.com/sidecarops/sidecarops/manager"
	"github.com/sidecarops/sidecarops/webhook"
)

// repeated is a repeatable string flag.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func main() {
	o := manager.Options{
		Namespace: os.Getenv("POD_NAMESPACE"),
		PodName:   os.Getenv("POD_NAME"),
		PodUID:    types.UID(os.Getenv("POD_UID")),
	}
	var bundlePaths, bundleURLs, keys repeated
	fs := flag.CommandLine
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "the manager's namespace (default $POD_NAMESPACE, else sidecarops-system)")
	fs.StringVar(&o.RevisionNamespace, "revision-namespace", "", "where the SidecarSets' ControllerRevisions are kept (default: --namespace; kruise-system keeps an OpenKruise's history when taking it over)")
	fs.StringVar(&o.ConfigurationNamespace, "configuration-namespace", "", "where the kruise-configuration ConfigMap (the patchPodMetadata whitelist) is read (default: --namespace; kruise-system reads the one OpenKruise left there)")
	fs.BoolVar(&o.OpenKruiseKept, "openkruise-kept", false, "run next to an OpenKruise kept for its other workloads (migration path B): answer pods after OpenKruise's pod webhook, leave the SidecarSet CRD's conversion to it, and keep its SidecarSet webhooks out of its webhook configurations")
	fs.StringVar(&o.WebhookHost, "webhook-host", "", "address the webhook server listens on (default all)")
	fs.IntVar(&o.WebhookPort, "webhook-port", 9443, "port of the webhook server")
	fs.BoolVar(&o.FailOpen, "fail-open", false, "admit pods unchanged, with a warning, while no policy snapshot is loaded yet (config/components/fail-open), instead of answering 503")
	fs.BoolVar(&o.EnableHTTP2, "enable-http2", false, "let the webhook server speak HTTP/2 (off: HTTP/1.1 only)")
	fs.Int64Var(&o.WebhookLimits.LargeBodyBytes, "webhook-large-body-bytes", webhook.DefaultLargeBodyBytes, "bytes of pod request bodies past their first 64 KiB being read at once; past it, 429 Too Many Requests")
	fs.Int64Var(&o.WebhookLimits.InFlightBytes, "webhook-in-flight-bytes", webhook.DefaultInFlightBytes, "bytes of pod admission requests (body plus 64 KiB each) decoded and answered at once; past it, 429 Too Many Requests")
	fs.Int64Var(&o.WebhookLimits.OtherPathBytes, "webhook-other-path-bytes", webhook.DefaultOtherPathBytes, "room of each other webhook path (SidecarSet defaulting, validation, conversion), for its requests being answered and, apart, for its bodies being read; past it, 429 Too Many Requests")
	fs.DurationVar(&o.WebhookLimits.BodyTimeout, "webhook-body-timeout", webhook.DefaultBodyTimeout, "how long an admission request's body may take to arrive")
	fs.IntVar(&o.WebhookLimits.MaxConnections, "webhook-max-connections", webhook.DefaultMaxConnections, "connections the webhook server holds open at once (each may read 64 KiB of a body outside the per-path rooms); past it, the connection idle longest is closed or the next one waits")
	injectionCache := fs.Bool("injection-cache", true, "answer a pod that neither the policies nor the injection can tell from an earlier one (a ReplicaSet's pods) with the earlier one's answer (false: decide and inject every pod)")
	prefilterOn := fs.Bool("pod-webhook-prefilter", true, "keep a match condition on the pod webhook's registration so the API server calls it only for pods some SidecarSet may inject into (false: every pod)")
	fs.StringVar(&o.CertDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory of tls.crt and tls.key")
	fs.StringVar(&o.CertMode, "cert-mode", manager.CertSelf, "self: generate and rotate certificates (cert-controller) and inject the CA into the webhook configurations; external: use the files in --cert-dir (cert-manager)")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8443", "Prometheus metrics address (0 disables); HTTPS for callers allowed GET /metrics unless --metrics-insecure")
	fs.BoolVar(&o.InsecureMetrics, "metrics-insecure", false, "serve the metrics over plain HTTP without authentication or authorization")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "/healthz and /readyz address (0 disables)")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "0", "Go profiles (net/http/pprof) address, loopback only: they are served without authentication (0 disables; e.g. 127.0.0.1:6060 with kubectl port-forward)")
	fs.BoolVar(&o.LeaderElection, "leader-elect", false, "elect a leader for controllers (webhooks serve on every replica)")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a leader's lease lasts without renewal (the hand-over time when a leader dies; a stopping leader releases it)")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader retries renewing before it gives up leadership")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "how often candidates try to acquire or renew the lease")
	fs.DurationVar(&o.GracefulShutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "how long the manager waits for its webhook server and controllers to stop after SIGTERM")
	fs.DurationVar(&o.StatusRecountInterval, "sidecarset-status-recount-interval", 5*time.Minute, "how often a SidecarSet's pods are counted in full while its status is kept from pod events, and the two compared (sidecarops_controller_status_recount_differences_total)")
	fs.IntVar(&o.SidecarSetWorkers, "sidecarset-workers", 3, "SidecarSets reconciled at once; -1 disables the SidecarSet controller")
	fs.Var(&bundlePaths, "bundle", "administrators' bundle file (.tar.gz) or directory, watched for changes; repeatable")
	fs.Var(&bundleURLs, "bundle-url", "OPA bundle service URL of an administrators' bundle, polled with ETag; repeatable")
	fs.DurationVar(&o.BundlePollInterval, "bundle-poll-interval", 5*time.Second, "how often bundle files are checked (HTTP: between this and twice this)")
	fs.DurationVar(&o.BundleDownloadTimeout, "bundle-download-timeout", 60*time.Second, "how long one download from a --bundle-url may take, body included")
	fs.Int64Var(&o.BundleLimits.ArchiveBytes, "bundle-max-download-bytes", bundles.MaxArchiveSize, "bytes of an administrators' bundle as downloaded or read from a .tar.gz file (compressed); a larger one is cut there and refused")
	fs.Int64Var(&o.BundleLimits.FileBytes, "bundle-max-file-bytes", bundles.MaxFileSize, "bytes of each file of an administrators' bundle, decompressed; a bundle with a larger one is refused")
	fs.Int64Var(&o.BundleLimits.TotalBytes, "bundle-max-total-bytes", bundles.MaxTotalSize, "bytes of an administrators' bundle decompressed (every file and tar header); a larger one is refused")
	fs.Var(&keys, "verification-key", "PEM public key every administrators' bundle must be signed with; repeatable (key id: file name)")
	fs.StringVar(&o.VerificationAlg, "verification-alg", "RS256", "signature algorithm of the verification keys")
	fs.StringVar(&o.VerificationScope, "verification-scope", "", "required scope claim of bundle signatures")
	fs.StringVar(&o.BundlePersistDir, "bundle-persist-dir", "", "directory keeping each bundle source's last good bundle across restarts")
	fs.BoolVar(&o.DefaultsAllowed, "patch-metadata-defaults-allowed", false, "feature gate SidecarSetPatchPodMetadataDefaultsAllowed")
	fs.DurationVar(&o.Debounce, "compile-debounce", 0, "quiet period after a change before recompiling the policies (0: 200ms)")
	fs.BoolVar(&o.DecisionLog, "decision-log", true, "log one line per pod admission")
	var mem memoryOptions
	fs.IntVar(&mem.gcPercent, "gc-percent", DefaultGCPercent, "Go GC target percentage while the heap is small (as GOGC; GOGC in the environment wins over it and --gc-heap-target)")
	fs.StringVar(&mem.heapTarget, "gc-heap-target", DefaultGCHeapTarget, "heap size past which the GC percent shrinks, after each collection, so that the next is due there (never below 50); 0: --gc-percent throughout")
	fs.StringVar(&mem.limit, "memory-limit", DefaultMemoryLimit, "Go soft memory limit: a quantity (400Mi), a percentage of the container's cgroup memory limit (none without one), or 0 for none; GOMEMLIMIT in the environment wins")
	printVersion := fs.Bool("version", false, "print the version, commit, Go and OPA versions, and exit")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	flag.Parse()
	info := version.Get()
	if *printVersion {
		fmt.Println(info.String("sidecarops-manager"))
		return
	}
	memory, err := mem.resolve(environment{getenv: os.Getenv, root: "/"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "sidecarops-manager:", err)
		os.Exit(2)
	}
	memory.apply()
	o.Bundles, o.BundleURLs, o.VerificationKeys = bundlePaths, bundleURLs, keys
	o.NoPodWebhookPrefilter = !*prefilterOn
	o.NoInjectionCache = !*injectionCache
	if o.Namespace == "" {
		o.Namespace = "sidecarops-system"
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	ctrl.Log.WithName("setup").Info("sidecarops-manager", "version", info.Version, "commit", info.Commit, "goVersion", info.GoVersion, "opaVersion", info.OPA)
	ctrl.Log.WithName("setup").Info("memory", "gcPercent", memory.gcPercent, "gcHeapTarget", memory.heapTarget,
		"memoryLimit", debug.SetMemoryLimit(-1), "memoryLimitFrom", memory.limitFrom)
	if o.PodName == "" {
		ctrl.Log.WithName("setup").Info("POD_NAME is not set (the downward API's metadata.name): bundle Events are recorded on the manager's Lease",
			"lease", manager.LeaderElectionID, "namespace", o.Namespace)
	}

	mgr, err := manager.New(ctrl.GetConfigOrDie(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sidecarops-manager:", err)
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "sidecarops-manager:", err)
		os.Exit(1)
	}
}
