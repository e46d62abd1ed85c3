package hotupdate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/agent"
	"github.com/sidecarops/sidecarops/agent/storage"
)

// Name is the plugin's name in config.yaml.
const Name = "hot_update"

// versionFile in fileDir records the result of the last update applied there, so a restarted
// agent does not download again what the shared volume already holds.
const versionFile = ".hot-update-version"

// Config is the plugin's configuration.
type Config struct {
	// LoadPatchType is how the app learns of a new file; "signal" is the one there is.
	LoadPatchType string `json:"loadPatchType,omitempty"`
	FileDir       string `json:"fileDir"`
	Signal        Signal `json:"signal"`
	// StorageConfig receives each result as JSON (value) with state Succeeded or Failed.
	StorageConfig storage.Config `json:"storageConfig"`
	// ResultConfigMap keeps the latest successful version per workload, in the pod's namespace
	// (default sidecar-agent-hot-update).
	ResultConfigMap string `json:"resultConfigMap,omitempty"`
	// Workload is the ConfigMap key pods share; ${SELF:POD_NAME}/${SELF:POD_NAMESPACE} are
	// substituted. Default: the pod's controller, a ReplicaSet counted as its Deployment.
	Workload string `json:"workload,omitempty"`
	// DownloadTimeoutSeconds bounds one download (default 60).
	DownloadTimeoutSeconds int `json:"downloadTimeoutSeconds,omitempty"`
	// MaxBytes bounds one downloaded file (default 64 MiB): a larger one fails the update and the
	// old file stays.
	MaxBytes int64 `json:"maxBytes,omitempty"`
	// FileMode is the mode a new file gets, e.g. 0644 (default: the mode of the file it replaces,
	// or 0644 when there is none), so that the app, which may run as another user, can read it.
	FileMode *uint32 `json:"fileMode,omitempty"`
}

// defaultMaxBytes bounds a download unless MaxBytes says otherwise.
const defaultMaxBytes = 64 << 20

// Signal says which process to signal and with what.
type Signal struct {
	ProcessName string `json:"processName"`
	SignalName  string `json:"signalName"`
}

// Validate implements agent.Validator.
func (c *Config) Validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.LoadPatchType != "" && c.LoadPatchType != "signal" {
		errs = append(errs, field.NotSupported(p.Child("loadPatchType"), c.LoadPatchType, []string{"signal"}))
	}
	if c.FileDir == "" || !filepath.IsAbs(c.FileDir) {
		errs = append(errs, field.Invalid(p.Child("fileDir"), c.FileDir, "must be an absolute directory path"))
	}
	if c.Signal.ProcessName == "" {
		errs = append(errs, field.Required(p.Child("signal", "processName"), ""))
	}
	if unix.SignalNum(c.Signal.SignalName) == 0 {
		errs = append(errs, field.Invalid(p.Child("signal", "signalName"), c.Signal.SignalName, "must be a signal name such as SIGHUP or SIGUSR1"))
	}
	if c.FileMode != nil && *c.FileMode > 0o777 {
		errs = append(errs, field.Invalid(p.Child("fileMode"), *c.FileMode, "must be a permission mode, at most 0777"))
	}
	if c.Workload != "" {
		// Placeholders expand to a pod name and namespace, both valid in a ConfigMap key.
		for _, msg := range validation.IsConfigMapKey(storage.Self{PodName: "pod", PodNamespace: "ns"}.Expand(c.Workload)) {
			errs = append(errs, field.Invalid(p.Child("workload"), c.Workload, msg))
		}
	}
	if c.ResultConfigMap != "" {
		for _, msg := range validation.IsDNS1123Subdomain(c.ResultConfigMap) {
			errs = append(errs, field.Invalid(p.Child("resultConfigMap"), c.ResultConfigMap, msg))
		}
	}
	if c.DownloadTimeoutSeconds < 0 {
		errs = append(errs, field.Invalid(p.Child("downloadTimeoutSeconds"), c.DownloadTimeoutSeconds, "must not be negative"))
	}
	return append(errs, c.StorageConfig.Validate(p.Child("storageConfig"))...)
}

// Request asks for an update. FileName defaults to the URL's last path element.
type Request struct {
	URL      string `json:"url"`
	Version  string `json:"version"`
	SHA256   string `json:"sha256,omitempty"`
	FileName string `json:"fileName,omitempty"`
}

// Result is what an update did; it is stored as JSON.
type Result struct {
	Version string    `json:"version"`
	URL     string    `json:"url"`
	File    string    `json:"file"`
	SHA256  string    `json:"sha256,omitempty"`
	Success bool      `json:"success"`
	Message string    `json:"message,omitempty"`
	Time    time.Time `json:"time"`
}

// Plugin is the hot_update plugin.
type Plugin struct {
	cfg    Config
	host   agent.Host
	sig    syscall.Signal
	client *http.Client
	// kill signals a process; tests replace it to make signalling fail.
	kill func(pid int, sig syscall.Signal) error

	// update serialises updates: one file, one process, one version at a time.
	update sync.Mutex
	mu     sync.Mutex
	last   *Result
	ctx    context.Context
	cancel context.CancelFunc
}

// New is the plugin's agent.Factory.
func New() agent.Plugin { return &Plugin{} }

// Name returns Name, the name config.yaml refers to and the one its HTTP API is served under.
func (p *Plugin) Name() string { return Name }

// Version is the plugin's version, shown in the agent's /status.
func (p *Plugin) Version() string { return "v0.1.0" }

// ConfigType returns a new zero Config, into which the manager decodes the plugin's config.
func (p *Plugin) ConfigType() any { return &Config{} }

// Init takes the configuration and fills its defaults.
func (p *Plugin) Init(cfg any, host agent.Host) error {
	c, err := agent.ConfigAs[Config](Name, cfg)
	if err != nil {
		return err
	}
	p.cfg, p.host = *c, host
	if p.cfg.ResultConfigMap == "" {
		p.cfg.ResultConfigMap = "sidecar-agent-hot-update"
	}
	if p.cfg.DownloadTimeoutSeconds == 0 {
		p.cfg.DownloadTimeoutSeconds = 60
	}
	if p.cfg.MaxBytes <= 0 {
		p.cfg.MaxBytes = defaultMaxBytes
	}
	if p.kill == nil {
		p.kill = syscall.Kill
	}
	p.sig = unix.SignalNum(p.cfg.Signal.SignalName)
	p.client = &http.Client{Timeout: time.Duration(p.cfg.DownloadTimeoutSeconds) * time.Second}
	return nil
}

// Start makes sure fileDir exists and restores the workload's latest version into it when the
// shared volume does not hold it yet. A failed restore fails the start, so restartPolicy retries.
func (p *Plugin) Start(ctx context.Context, _ chan<- error) error {
	// fileDir is normally the mount point of an emptyDir shared with the app, which exists already
	// (kubelet makes it 0777, and group fsGroup with setgid when the pod sets one) and keeps its mode.
	// A directory still to be created gets 0750: the app only enters and reads, and it shares either
	// the agent's uid or the pod's fsGroup, which a directory made inside a setgid volume inherits.
	// Other users have no business there. (Downloads keep os.CreateTemp's 0600, so today only the
	// agent's uid can read the files themselves.)
	if err := os.MkdirAll(p.cfg.FileDir, 0o750); err != nil {
		return fmt.Errorf("hot_update: fileDir: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	p.mu.Lock()
	p.ctx, p.cancel = ctx, cancel
	p.mu.Unlock()
	return p.restore(ctx)
}

// Stop refuses new requests and waits for an update in progress, so the file is never left
// half-replaced and its result is recorded.
func (p *Plugin) Stop(ctx context.Context) error {
	p.mu.Lock()
	if p.cancel != nil {
		p.cancel()
	}
	p.mu.Unlock()
	locked := make(chan struct{})
	go func() {
		// A barrier, not a critical section: Update and restore hold update for the whole of an
		// update, so acquiring it means the one in progress (if any) has finished and recorded
		// its result. Later requests are refused, or, having raced past the handler's check, fail
		// at once on the cancelled ctx.
		p.update.Lock()
		p.update.Unlock() //nolint:staticcheck // SA2001: the empty section is a barrier waiting for the update in progress, see above
		close(locked)
	}()
	select {
	case <-locked:
		p.client.CloseIdleConnections()
		return nil
	case <-ctx.Done():
		return fmt.Errorf("hot_update: an update is still in progress: %w", ctx.Err())
	}
}

// Status is the last result.
func (p *Plugin) Status() any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// Handler serves POST /update (a Request) and GET /result (the last Result).
func (p *Plugin) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /update", func(w http.ResponseWriter, r *http.Request) {
		var req Request
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			http.Error(w, "hot_update: request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		p.mu.Lock()
		ctx := p.ctx
		p.mu.Unlock()
		if ctx == nil || ctx.Err() != nil {
			http.Error(w, "hot_update: plugin is not running", http.StatusServiceUnavailable)
			return
		}
		res, code := p.Update(ctx, req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(res)
	})
	mux.HandleFunc("GET /result", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p.Status())
	})
	return mux
}

// Update applies req and records the result; code is the HTTP status answering it (200 applied,
// 400 invalid request, 502 download failed, 409 process missing or signal refused).
func (p *Plugin) Update(ctx context.Context, req Request) (Result, int) {
	p.update.Lock()
	defer p.update.Unlock()
	res, code := p.apply(ctx, req, true)
	p.record(ctx, res)
	return res, code
}

type failure struct {
	code int
	err  error
}

func (f *failure) Error() string { return f.err.Error() }

func (p *Plugin) apply(ctx context.Context, req Request, mustSignal bool) (Result, int) {
	res := Result{Version: req.Version, URL: req.URL, Time: time.Now().UTC()}
	file, sum, err := p.replace(ctx, req, mustSignal)
	res.File, res.SHA256 = file, sum
	if err != nil {
		res.Message = err.Error()
		var f *failure
		if errors.As(err, &f) {
			return res, f.code
		}
		return res, http.StatusInternalServerError
	}
	res.Success = true
	res.Message = "applied"
	if !mustSignal {
		res.Message = "restored the workload's latest version"
	}
	if err := writeAtomically(filepath.Join(p.cfg.FileDir, versionFile), toJSON(res)); err != nil {
		res.Message += "; recording the version in fileDir failed: " + err.Error()
	}
	return res, http.StatusOK
}

// replace downloads req into fileDir and signals the process. With mustSignal a missing process
// is a failure that leaves the old file; without (a start-up restore, the app may not run yet)
// the file is replaced and a running process is still signalled.
func (p *Plugin) replace(ctx context.Context, req Request, mustSignal bool) (file, sum string, err error) {
	bad := func(format string, a ...any) error {
		return &failure{code: http.StatusBadRequest, err: fmt.Errorf(format, a...)}
	}
	u, err := url.Parse(req.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", "", bad("url %q must be an absolute http:// or https:// URL", req.URL)
	}
	if req.Version == "" {
		return "", "", bad("version is required")
	}
	name := req.FileName
	if name == "" {
		name = path.Base(u.Path)
	}
	if name == "" || name == "." || name == "/" || name == ".." || strings.ContainsAny(name, `/\`) || name == versionFile {
		return "", "", bad("file name %q: give fileName, a plain file name", name)
	}
	target := filepath.Join(p.cfg.FileDir, name)
	tmp, sum, err := p.download(ctx, req)
	if err != nil {
		return target, "", err
	}
	defer os.Remove(tmp) // a no-op once renamed
	pids, err := findProcesses("/proc", p.cfg.Signal.ProcessName)
	if err != nil {
		return target, sum, fmt.Errorf("looking up process %q: %w", p.cfg.Signal.ProcessName, err)
	}
	if len(pids) == 0 && mustSignal {
		return target, sum, &failure{code: http.StatusConflict, err: fmt.Errorf(
			"no process %q to signal (is shareProcessNamespace set?); the old file stays", p.cfg.Signal.ProcessName)}
	}
	if err := os.Chmod(tmp, p.fileMode(target)); err != nil {
		return target, sum, fmt.Errorf("setting the mode of the new %s: %w", target, err)
	}
	// The old file is kept aside until every process took the signal: a refused signal puts it
	// back, so the app never runs with a file it was not told about.
	backup := ""
	if _, err := os.Stat(target); err == nil {
		backup = filepath.Join(p.cfg.FileDir, ".previous-"+name)
		if err := os.Link(target, backup); err != nil {
			return target, sum, fmt.Errorf("keeping the old %s: %w", target, err)
		}
		defer os.Remove(backup)
	}
	if err := os.Rename(tmp, target); err != nil {
		return target, sum, fmt.Errorf("replacing %s: %w", target, err)
	}
	for _, pid := range pids {
		if err := p.kill(pid, p.sig); err != nil {
			restored := "the old file is back"
			if backup == "" {
				restored = "there was no old file; the new one stays"
			} else if rerr := os.Rename(backup, target); rerr != nil {
				restored = "putting the old file back failed too: " + rerr.Error()
			}
			return target, sum, &failure{code: http.StatusConflict, err: fmt.Errorf(
				"signalling process %q (pid %d) with %s failed: %w; %s", p.cfg.Signal.ProcessName, pid, p.cfg.Signal.SignalName, err, restored)}
		}
	}
	return target, sum, nil
}

// fileMode is the mode a new file at target gets: FileMode, else the replaced file's, else 0644.
func (p *Plugin) fileMode(target string) os.FileMode {
	if p.cfg.FileMode != nil {
		return os.FileMode(*p.cfg.FileMode).Perm()
	}
	if info, err := os.Stat(target); err == nil {
		return info.Mode().Perm()
	}
	return 0o644
}

// download writes req's body to a temporary file in fileDir (so the rename is atomic) and checks
// its checksum.
func (p *Plugin) download(ctx context.Context, req Request) (tmp, sum string, err error) {
	failed := func(format string, a ...any) (string, string, error) {
		return "", "", &failure{code: http.StatusBadGateway, err: fmt.Errorf(format, a...)}
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, req.URL, nil)
	if err != nil {
		return failed("download %s: %w", req.URL, err)
	}
	resp, err := p.client.Do(hreq)
	if err != nil {
		return failed("download: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return failed("download %s: status %d", req.URL, resp.StatusCode)
	}
	f, err := os.CreateTemp(p.cfg.FileDir, ".download-*")
	if err != nil {
		return "", "", fmt.Errorf("download into fileDir: %w", err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(resp.Body, p.cfg.MaxBytes+1))
	if err == nil && n > p.cfg.MaxBytes {
		err = fmt.Errorf("larger than maxBytes %d; the old file stays", p.cfg.MaxBytes)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return failed("download %s: %w", req.URL, err)
	}
	sum = hex.EncodeToString(h.Sum(nil))
	if req.SHA256 != "" && !strings.EqualFold(req.SHA256, sum) {
		os.Remove(f.Name())
		return "", "", &failure{code: http.StatusBadGateway, err: fmt.Errorf("checksum mismatch: got sha256 %s, want %s; the old file stays", sum, req.SHA256)}
	}
	return f.Name(), sum, nil
}

func writeAtomically(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// toJSON encodes a Result or Request, which hold only strings, a bool and a time: json.Marshal
// cannot fail on them.
func toJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// record stores the result (pod annotation through storageConfig) and, when it succeeded, makes
// its version the workload's latest.
func (p *Plugin) record(ctx context.Context, res Result) {
	p.mu.Lock()
	p.last = &res
	p.mu.Unlock()
	log := p.host.Logger().WithValues("version", res.Version, "file", res.File, "success", res.Success)
	if res.Success {
		log.Info("hot update applied", "message", res.Message)
	} else {
		log.Info("hot update failed", "message", res.Message)
	}
	state := "Failed"
	if res.Success {
		state = "Succeeded"
	}
	if err := p.host.Store(ctx, p.cfg.StorageConfig, storage.Record{Value: string(toJSON(res)), State: state, OK: res.Success}); err != nil {
		log.Error(err, "storing the hot update result")
	}
	if !res.Success || p.host.Kube() == nil {
		return
	}
	key, err := p.workload(ctx)
	if err == nil {
		latest := Request{URL: res.URL, Version: res.Version, SHA256: res.SHA256, FileName: filepath.Base(res.File)}
		_, err = p.host.Kube().PutKey(ctx, p.cfg.ResultConfigMap, key, string(toJSON(latest)))
	}
	if err != nil {
		log.Error(err, "recording the workload's latest version")
	}
}

// restore brings fileDir to the workload's latest version from the result ConfigMap.
func (p *Plugin) restore(ctx context.Context) error {
	k := p.host.Kube()
	if k == nil {
		return nil
	}
	key, err := p.workload(ctx)
	if err != nil {
		return fmt.Errorf("hot_update: %w", err)
	}
	raw, found, err := k.GetKey(ctx, p.cfg.ResultConfigMap, key)
	if err != nil || !found {
		return err
	}
	var latest Request
	if err := json.Unmarshal([]byte(raw), &latest); err != nil {
		return fmt.Errorf("hot_update: ConfigMap %s key %s: %w", p.cfg.ResultConfigMap, key, err)
	}
	if have, err := os.ReadFile(filepath.Join(p.cfg.FileDir, versionFile)); err == nil {
		var cur Result
		if json.Unmarshal(have, &cur) == nil && cur.Success && cur.Version == latest.Version {
			p.mu.Lock()
			p.last = &cur
			p.mu.Unlock()
			return nil
		}
	}
	p.update.Lock()
	defer p.update.Unlock()
	res, _ := p.apply(ctx, latest, false)
	p.record(ctx, res)
	if !res.Success {
		return fmt.Errorf("hot_update: restoring version %s of %s: %s", latest.Version, key, res.Message)
	}
	return nil
}

// workload is the ConfigMap key of the pod's workload.
func (p *Plugin) workload(ctx context.Context) (string, error) {
	if p.cfg.Workload != "" {
		return p.host.Self().Expand(p.cfg.Workload), nil
	}
	pod, err := p.host.Kube().Pod(ctx)
	if err != nil {
		return "", err
	}
	for _, o := range pod.OwnerReferences {
		if o.Controller == nil || !*o.Controller {
			continue
		}
		if hash := pod.Labels["pod-template-hash"]; o.Kind == "ReplicaSet" && hash != "" && strings.HasSuffix(o.Name, "-"+hash) {
			return "Deployment." + strings.TrimSuffix(o.Name, "-"+hash), nil
		}
		return o.Kind + "." + o.Name, nil
	}
	return "Pod." + pod.Name, nil
}
