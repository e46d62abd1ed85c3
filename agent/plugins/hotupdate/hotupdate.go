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
	// AllowedURLPrefixes are where files may come from: a URL is downloaded only when it has an
	// entry's scheme, host and port, and its path starts with the entry's path. Empty: from nowhere.
	AllowedURLPrefixes []string `json:"allowedURLPrefixes,omitempty"`
	// AllowRedirects follows redirects (default false), each one checked against AllowedURLPrefixes.
	AllowRedirects bool `json:"allowRedirects,omitempty"`
	// AllowPrivateNetworks lets downloads connect to loopback, private, link-local (the cloud
	// metadata address) and other non-public addresses (default false): the pod's own and its
	// cluster's services are what a forged URL would be aimed at.
	AllowPrivateNetworks bool `json:"allowPrivateNetworks,omitempty"`
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
	if c.MaxBytes < 0 {
		errs = append(errs, field.Invalid(p.Child("maxBytes"), c.MaxBytes, "must not be negative"))
	}
	for i, s := range c.AllowedURLPrefixes {
		if _, err := parsePrefix(s); err != nil {
			errs = append(errs, field.Invalid(p.Child("allowedURLPrefixes").Index(i), s, err.Error()))
		}
	}
	return append(errs, c.StorageConfig.Validate(p.Child("storageConfig"))...)
}

// Request asks for an update: the body of POST /update. FileName defaults to the URL's last path
// element.
type Request struct {
	URL      string `json:"url"`
	Version  string `json:"version"`
	SHA256   string `json:"sha256,omitempty"`
	FileName string `json:"fileName,omitempty"`
}

// Result is what an update did; it is stored as JSON.
type Result struct {
	Version string `json:"version"`
	URL     string `json:"url"`
	// RequestedBy is the authenticated user who asked for the version (for a restore: who asked for
	// it first).
	RequestedBy string    `json:"requestedBy,omitempty"`
	File        string    `json:"file"`
	SHA256      string    `json:"sha256,omitempty"`
	Success     bool      `json:"success"`
	Message     string    `json:"message,omitempty"`
	Time        time.Time `json:"time"`
}

// latest is the workload's latest version, as the result ConfigMap keeps it.
type latest struct {
	Request
	// RequestedBy is the authenticated user whose request made it the latest. A pod restores only a
	// record that names one: before the API was authenticated anyone could have written it.
	RequestedBy string `json:"requestedBy,omitempty"`
}

// Plugin is the hot_update plugin.
type Plugin struct {
	cfg     Config
	host    agent.Host
	sig     syscall.Signal
	allowed allowList
	client  *http.Client
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
	p.allowed = nil
	for _, s := range p.cfg.AllowedURLPrefixes {
		u, err := parsePrefix(s)
		if err != nil {
			return fmt.Errorf("hot_update: allowedURLPrefixes: %q: %w", s, err)
		}
		p.allowed = append(p.allowed, u)
	}
	p.client = newClient(time.Duration(p.cfg.DownloadTimeoutSeconds)*time.Second, p.allowed, p.cfg.AllowRedirects, p.cfg.AllowPrivateNetworks, nil)
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
		req, err := decodeRequest(r.Body)
		if err != nil {
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
		res, code := p.Update(ctx, agent.Caller(r.Context()), req)
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

// maxBody bounds a request body; a Request is a few short strings.
const maxBody = 1 << 16

// decodeRequest reads a request body: one JSON object with Request's fields and no others.
func decodeRequest(body io.Reader) (Request, error) {
	var req Request
	dec := json.NewDecoder(io.LimitReader(body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return Request{}, err
	}
	return req, nil
}

// Update applies req on behalf of caller, the authenticated user asking, and records the result;
// code is the HTTP status answering it (200 applied, 400 invalid request, 401 no caller, 403 URL not
// allowed, 502 download failed, 409 process missing or signal refused).
func (p *Plugin) Update(ctx context.Context, caller string, req Request) (Result, int) {
	if caller == "" {
		// The agent's server authenticates every request; reaching here without a caller is a
		// wiring fault, and nothing is done nor recorded on nobody's behalf.
		p.host.Logger().Error(nil, "hot update refused: no authenticated caller", "url", redacted(req.URL))
		return Result{Version: req.Version, URL: redacted(req.URL), Message: "no authenticated caller", Time: time.Now().UTC()}, http.StatusUnauthorized
	}
	p.update.Lock()
	defer p.update.Unlock()
	res, code := p.apply(ctx, req, caller, true)
	p.record(ctx, res)
	return res, code
}

// failure is an update that did not happen: code answers it, reason (when set) counts it as
// refused.
type failure struct {
	code   int
	reason string
	err    error
}

func (f *failure) Error() string { return f.err.Error() }

func (p *Plugin) apply(ctx context.Context, req Request, caller string, mustSignal bool) (Result, int) {
	res := Result{Version: req.Version, URL: redacted(req.URL), RequestedBy: caller, Time: time.Now().UTC()}
	file, sum, err := p.replace(ctx, req, mustSignal)
	res.File, res.SHA256 = file, sum
	if err != nil {
		res.Message = err.Error()
		var f *failure
		if !errors.As(err, &f) {
			return res, http.StatusInternalServerError
		}
		if f.reason != "" {
			p.host.Refused(f.reason)
		}
		return res, f.code
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

// check validates req and returns the file it replaces: 400 for a malformed request, 403 for a URL
// outside allowedURLPrefixes. Errors name the request's field.
func (p *Plugin) check(req Request) (target string, err error) {
	bad := func(format string, a ...any) error {
		return &failure{code: http.StatusBadRequest, err: fmt.Errorf(format, a...)}
	}
	u, err := url.Parse(req.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return "", bad("url %q must be an absolute http:// or https:// URL", req.URL)
	}
	if u.User != nil {
		return "", bad("url %s must not carry credentials: it is recorded where the namespace can read it", u.Redacted())
	}
	if req.Version == "" {
		return "", bad("version is required")
	}
	if req.SHA256 != "" && !isSHA256(req.SHA256) {
		return "", bad("sha256 %q must be 64 hexadecimal digits", req.SHA256)
	}
	name := req.FileName
	if name == "" {
		name = path.Base(u.Path)
	}
	if name == "" || name == "." || name == "/" || name == ".." || strings.ContainsAny(name, `/\`) || name == versionFile {
		return "", bad("fileName %q must be a plain file name (give fileName when the URL's path does not end in one)", name)
	}
	if err := p.allowed.check(u); err != nil {
		return "", err
	}
	return filepath.Join(p.cfg.FileDir, name), nil
}

// redacted is raw without a password: a refused URL's result is stored where the namespace reads it.
func redacted(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return raw
}

func isSHA256(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == sha256.Size
}

// replace downloads req into fileDir and signals the process. With mustSignal a missing process
// is a failure that leaves the old file; without (a start-up restore, the app may not run yet)
// the file is replaced and a running process is still signalled.
func (p *Plugin) replace(ctx context.Context, req Request, mustSignal bool) (file, sum string, err error) {
	target, err := p.check(req)
	if err != nil {
		return "", "", err
	}
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
		backup = filepath.Join(p.cfg.FileDir, ".previous-"+filepath.Base(target))
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
// its size and checksum before the file is put in place: a refused download changes nothing the
// app reads.
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
		// A refused redirect or address keeps its code and reason; the message is the client's.
		if f := (*failure)(nil); errors.As(err, &f) {
			return "", "", &failure{code: f.code, reason: f.reason, err: fmt.Errorf("download: %w", err)}
		}
		return failed("download: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return failed("download %s: status %d", req.URL, resp.StatusCode)
	}
	tooLarge := &failure{code: http.StatusBadGateway, reason: reasonTooLarge,
		err: fmt.Errorf("download %s: larger than maxBytes %d; the old file stays", req.URL, p.cfg.MaxBytes)}
	if resp.ContentLength > p.cfg.MaxBytes {
		return "", "", tooLarge
	}
	f, err := os.CreateTemp(p.cfg.FileDir, ".download-*")
	if err != nil {
		return "", "", fmt.Errorf("download into fileDir: %w", err)
	}
	h := sha256.New()
	// A body without Content-Length (or lying about it) is cut at one byte past the bound, so that
	// "exactly maxBytes" and "more" can be told apart without reading more.
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(resp.Body, p.cfg.MaxBytes+1))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil || n > p.cfg.MaxBytes {
		os.Remove(f.Name())
		if err == nil {
			return "", "", tooLarge
		}
		return failed("download %s: %w", req.URL, err)
	}
	sum = hex.EncodeToString(h.Sum(nil))
	if req.SHA256 != "" && !strings.EqualFold(req.SHA256, sum) {
		os.Remove(f.Name())
		return "", "", &failure{code: http.StatusBadGateway, reason: reasonChecksumMismatch,
			err: fmt.Errorf("checksum mismatch: got sha256 %s, want %s; the old file stays", sum, req.SHA256)}
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
		rec := latest{Request: Request{URL: res.URL, Version: res.Version, SHA256: res.SHA256, FileName: filepath.Base(res.File)},
			RequestedBy: res.RequestedBy}
		_, err = p.host.Kube().PutKey(ctx, p.cfg.ResultConfigMap, key, string(toJSON(rec)))
	}
	if err != nil {
		log.Error(err, "recording the workload's latest version")
	}
}

// restore brings fileDir to the workload's latest version from the result ConfigMap, if an
// authenticated request wrote it and the configuration in force still allows it. A record that
// fails either is ignored, logged and counted: whoever can write the ConfigMap must not make every
// new pod of the workload download what they like.
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
	var rec latest
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return fmt.Errorf("hot_update: ConfigMap %s key %s: %w", p.cfg.ResultConfigMap, key, err)
	}
	log := p.host.Logger().WithValues("configMap", p.cfg.ResultConfigMap, "key", key, "version", rec.Version, "url", rec.URL)
	if rec.RequestedBy == "" {
		log.Info("not restoring the workload's latest version: no authenticated request wrote it (an older agent did, or someone edited the ConfigMap); the next update replaces it")
		p.host.Refused(reasonRecordUnauthenticated)
		return nil
	}
	// The checksum is what ties the file downloaded now to the one the requester got.
	if _, err := p.check(rec.Request); err != nil || !isSHA256(rec.SHA256) {
		if err == nil {
			err = errors.New("it has no sha256")
		}
		log.Info("not restoring the workload's latest version: the configuration in force does not allow it", "reason", err.Error())
		p.host.Refused(reasonRecordNotAllowed)
		return nil
	}
	if have, err := os.ReadFile(filepath.Join(p.cfg.FileDir, versionFile)); err == nil {
		var cur Result
		if json.Unmarshal(have, &cur) == nil && cur.Success && cur.Version == rec.Version {
			p.mu.Lock()
			p.last = &cur
			p.mu.Unlock()
			return nil
		}
	}
	p.update.Lock()
	defer p.update.Unlock()
	res, code := p.apply(ctx, rec.Request, rec.RequestedBy, false)
	p.record(ctx, res)
	switch {
	case res.Success:
		return nil
	case code == http.StatusForbidden:
		// Refused (a redirect, an address): retrying cannot help; apply counted it.
		log.Info("not restoring the workload's latest version: its download was refused", "reason", res.Message)
		return nil
	}
	return fmt.Errorf("hot_update: restoring version %s of %s: %s", rec.Version, key, res.Message)
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
