package devcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ManagerProcess is the manager running as its own process (cmd/sidecarops-manager), so that a
// test can kill it the way a node kills a container.
type ManagerProcess struct {
	// Log is the file the process writes its output to.
	Log  string
	cmd  *exec.Cmd
	done chan error

	// exited is closed once the process's exit status is in err: Kill and Terminate may be called
	// again (a test's cleanup after the test killed it) and must then return at once.
	waitOnce sync.Once
	exited   chan struct{}
	err      error
}

// LogsOnFailure has the files procs write their output to named when tb fails, and removed when it
// passes, so that passing runs leave nothing behind in the temporary directory.
func LogsOnFailure(tb testing.TB, procs ...*ManagerProcess) {
	tb.Cleanup(func() {
		for _, p := range procs {
			if tb.Failed() {
				tb.Logf("a manager's output: %s", p.Log)
			} else {
				_ = os.Remove(p.Log)
			}
		}
	})
}

// wait waits for the process to exit and returns how Wait reported it, every time.
func (p *ManagerProcess) wait() error {
	p.waitOnce.Do(func() {
		p.err = <-p.done
		// Put it back for Cluster.WaitReady, which watches the same channel for an early exit.
		p.done <- p.err
		close(p.exited)
	})
	<-p.exited
	return p.err
}

// StartManagerProcess stops the in-process manager (if running) and starts bin, a build of
// cmd/sidecarops-manager, with the cluster's manager options as flags, returning once it is
// ready. Only the options the rollout tests use are mapped; others are refused rather than
// silently dropped.
func (c *Cluster) StartManagerProcess(ctx context.Context, bin string) (*ManagerProcess, error) {
	return c.StartManagerProcessWith(ctx, bin, ProcessOptions{})
}

// ProcessOptions are what StartManagerProcessWith passes to the manager process besides the
// cluster's manager options.
type ProcessOptions struct {
	// Args are flags after those of the cluster's manager options (a later flag wins).
	Args []string
	// Env is added to this process's environment ("NAME=value"; a later entry wins).
	Env []string
}

// StartManagerProcessWith is StartManagerProcess with extra flags and environment variables, such as
// those a Deployment sets.
func (c *Cluster) StartManagerProcessWith(ctx context.Context, bin string, po ProcessOptions) (*ManagerProcess, error) {
	o := c.Manager
	if len(o.Bundles) > 0 || len(o.BundleURLs) > 0 || len(o.VerificationKeys) > 0 || o.BundlePersistDir != "" {
		return nil, errors.New("devcluster: StartManagerProcess does not pass bundle options")
	}
	if err := c.stopManager(); err != nil {
		return nil, err
	}
	args := []string{
		"--namespace=" + o.Namespace,
		"--webhook-host=" + o.WebhookHost,
		"--webhook-port=" + strconv.Itoa(o.WebhookPort),
		"--cert-dir=" + o.CertDir,
		"--cert-mode=" + o.CertMode,
		"--metrics-bind-address=" + o.MetricsAddr,
		"--health-probe-bind-address=" + o.ProbeAddr,
		"--compile-debounce=" + o.Debounce.String(),
		"--decision-log=" + strconv.FormatBool(o.DecisionLog),
		"--kubeconfig=" + c.Kubeconfig,
		"--leader-elect=" + strconv.FormatBool(o.LeaderElection),
	}
	for flag, d := range map[string]time.Duration{
		"--leader-elect-lease-duration": o.LeaseDuration, "--leader-elect-renew-deadline": o.RenewDeadline, "--leader-elect-retry-period": o.RetryPeriod,
	} {
		if d > 0 {
			args = append(args, flag+"="+d.String())
		}
	}
	args = append(args, po.Args...)
	log, err := os.CreateTemp("", "sidecarops-manager-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...) // #nosec G204 -- the repository's own manager build
	cmd.Stdout, cmd.Stderr = log, log
	if len(po.Env) > 0 {
		cmd.Env = append(os.Environ(), po.Env...)
	}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("devcluster: starting %s: %w", bin, err)
	}
	p := &ManagerProcess{Log: log.Name(), cmd: cmd, done: make(chan error, 1), exited: make(chan struct{})}
	go func() {
		p.done <- cmd.Wait()
		_ = log.Close()
	}()
	// WaitReady watches c.done for an early exit: point it at the process.
	c.done = p.done
	if err := c.WaitReady(ctx, 2*time.Minute); err != nil {
		_ = p.Kill()
		return nil, fmt.Errorf("%w (the manager's output: %s)", err, p.Log)
	}
	return p, nil
}

// RSS is the process's resident set size now, from /proc (Linux).
func (p *ManagerProcess) RSS() (int64, error) { return p.status("VmRSS") }

// PeakRSS is the largest resident set size the process has had since it started or since
// ResetPeakRSS (VmHWM, Linux).
func (p *ManagerProcess) PeakRSS() (int64, error) { return p.status("VmHWM") }

// ResetPeakRSS starts PeakRSS again from the present resident set size (Linux's clear_refs).
func (p *ManagerProcess) ResetPeakRSS() error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.cmd.Process.Pid), []byte("5"), 0)
}

// RSSAnon is the part of RSS that is the process's own memory (heap, stacks, the runtime's), not
// pages of mapped files such as its executable's code, which the kernel may drop and read again.
func (p *ManagerProcess) RSSAnon() (int64, error) { return p.status("RssAnon") }

// CPU is the user + system CPU time the process has used (ProcessCPU).
func (p *ManagerProcess) CPU() (time.Duration, error) { return ProcessCPU(p.cmd.Process.Pid) }

// ProcessCPU is the user + system CPU time process pid has used, from /proc/<pid>/stat (Linux; in
// clock ticks of 10 ms: USER_HZ is 100). Benchmarks read it of processes other than their own.
func ProcessCPU(pid int) (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command, field 2, is in parentheses and may hold spaces: the fields after it are counted.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("devcluster: /proc/%d/stat: %d fields after the command", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("devcluster: /proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// status is a size field of /proc/<pid>/status, in bytes.
func (p *ManagerProcess) status(field string) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("devcluster: no %s in /proc/<pid>/status", field)
}

// Kill sends SIGKILL and waits for the process to be gone: no shutdown hooks, no lease release,
// requests in flight cut wherever they are.
func (p *ManagerProcess) Kill() error {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	// An *exec.ExitError is the exit status, "signal: killed" for the kill just sent (or whatever
	// ended the process first): the process is gone, which is all Kill promises. Anything else is
	// Wait failing, and is returned.
	var exit *exec.ExitError
	if err := p.wait(); err != nil && !errors.As(err, &exit) {
		return err
	}
	return nil
}

// Terminate sends SIGTERM, as the kubelet does to stop a pod, and waits until the process exits;
// its exit status is returned (nil for a clean shutdown).
func (p *ManagerProcess) Terminate() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return p.wait()
}

// Build builds ./cmd/NAME of the repository at root into dir and returns the binary's path: the
// process tests run what a user runs.
func Build(root, name, dir string) (string, error) {
	bin := filepath.Join(dir, name)
	build := exec.Command("go", "build", "-o", bin, "./cmd/"+name) // #nosec G204 -- the repository's own command
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w: %s", name, err, out)
	}
	return bin, nil
}
