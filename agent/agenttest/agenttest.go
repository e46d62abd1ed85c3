package agenttest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"

	"github.com/sidecarops/sidecarops/agent/storage"
)

// Stored is one Store call.
type Stored struct {
	Config storage.Config
	Record storage.Record
}

// Host records Store and Refused calls.
type Host struct {
	T   *testing.T
	Pod storage.Self
	// API is what Kube returns; nil is the agent without API access (--no-kube).
	API     *storage.Kube
	mu      sync.Mutex
	recs    []Stored
	refused []string
	err     error
}

// FailStores makes Store record and then return err (nil: succeed again).
func (h *Host) FailStores(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.err = err
}

// Logger logs through the test's t.Log, so the plugin's output shows with the failing test.
func (h *Host) Logger() logr.Logger { return testr.New(h.T) }

// Self returns Pod, the pod the plugin is told it runs in.
func (h *Host) Self() storage.Self { return h.Pod }

// Kube returns API.
func (h *Host) Kube() *storage.Kube { return h.API }

// Store records the call (see Stored) and returns the error set by FailStores.
func (h *Host) Store(_ context.Context, c storage.Config, r storage.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, Stored{c, r})
	return h.err
}

// Refused records reason (see Refusals).
func (h *Host) Refused(reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refused = append(h.refused, reason)
}

// Refusals returns the reasons of the Refused calls so far, in order.
func (h *Host) Refusals() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.refused...)
}

// Stored returns a copy of the Store calls so far.
func (h *Host) Stored() []Stored {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Stored(nil), h.recs...)
}

var build struct {
	once sync.Once
	bin  string
	err  error
}

// SignalRecorder is a running sigrecorder child process under a name no other test uses, so
// tests running at the same time never signal each other's process.
type SignalRecorder struct {
	// Name is the process's name (its comm and executable base name).
	Name string
	file string
}

// StartSignalRecorder builds sigrecorder (once per test binary), starts it under a fresh name and
// waits until it handles signals; it is killed when the test ends.
func StartSignalRecorder(t *testing.T) *SignalRecorder {
	t.Helper()
	build.once.Do(func() {
		dir, err := os.MkdirTemp("", "sigrecorder-")
		if err != nil {
			build.err = err
			return
		}
		build.bin = filepath.Join(dir, "sigrecorder")
		out, err := exec.Command("go", "build", "-o", build.bin, "github.com/sidecarops/sidecarops/agent/agenttest/sigrecorder").CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build sigrecorder: %w: %s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	dir := t.TempDir()
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	// comm holds 15 bytes: "sigrec-" and 8 hex digits.
	r := &SignalRecorder{Name: "sigrec-" + hex.EncodeToString(suffix), file: filepath.Join(dir, "signals")}
	bin := filepath.Join(dir, r.Name)
	if err := os.Link(build.bin, bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, r.file)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(r.file); err == nil {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("sigrecorder %s did not start within a minute", r.Name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Signals lists the signals received so far, e.g. ["SIGHUP"].
func (r *SignalRecorder) Signals(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(r.file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(data))
}
