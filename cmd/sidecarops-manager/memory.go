package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Memory defaults (docs/operations.md, "Sizing").
const (
	// DefaultGCPercent is the manager's GC target (--gc-percent) while its heap is small. The
	// manager's live heap is small (the policy snapshot, the informer caches) while every pod
	// admission allocates tens of kilobytes, so with Go's default of 100 the GC runs every few
	// hundred admissions and took a large share of the webhook's CPU; at 400 the pod webhook
	// serves more admissions per CPU (docs/benchmarks.md). The heap may then grow to 5× the live
	// heap between collections, which --gc-heap-target bounds once the live heap grows.
	DefaultGCPercent = 400
	// DefaultGCHeapTarget (--gc-heap-target) is the heap size at which the GC percent starts to
	// shrink: with 1,000 SidecarSets and 10,000 pods, --gc-percent 400 throughout let the process
	// grow far past its memory target. The process's resident memory is its executable's pages
	// plus about the heap's goal, so the target is what bounds it: at 48Mi the heap stays within
	// 1.25× of the live heap (MinGCPercent) and the process under its memory target; the price is
	// more frequent collections, some CPU per admission with a large live heap
	// (BenchmarkManagerMemory, BenchmarkAdmissionGC; docs/benchmarks.md, "Manager memory").
	DefaultGCHeapTarget = "48Mi"
	// MinGCPercent is as far as the GC percent shrinks for --gc-heap-target: past it, the heap
	// grows to 1.25× the live heap (and the soft memory limit, if any, takes over): a floor, so
	// that a live heap past the target does not make collections ever more frequent.
	MinGCPercent = 25
	// DefaultMemoryLimit (--memory-limit) is the Go runtime's soft memory limit: 90 % of the
	// container's memory limit, leaving what the runtime does not count (and the kernel's page
	// cache for the process) room below the OOM killer.
	DefaultMemoryLimit = "90%"
)

// memoryOptions are the flags sizing the manager's memory.
type memoryOptions struct {
	gcPercent  int
	heapTarget string // a quantity; 0 disables
	limit      string // a quantity, N% of the container's limit, or 0
}

// memorySettings are what memoryOptions resolve to, applied by apply.
type memorySettings struct {
	// gcPercent is the GC target; with heapTarget > 0 the most the tuner sets. -1: GOGC decides.
	gcPercent  int
	heapTarget int64
	// limit is the soft memory limit in bytes; 0: none set here (GOMEMLIMIT's, or none).
	limit int64
	// limitFrom says where the limit came from, for the start-up log line.
	limitFrom string
}

// environment is what resolve reads besides the flags: the environment variables and the cgroup
// file system under root ("/" in production, a temporary directory in tests).
type environment struct {
	getenv func(string) string
	root   string
}

// resolve turns the flags into settings. GOGC in the environment wins over --gc-percent and
// --gc-heap-target, GOMEMLIMIT over --memory-limit, as the Go runtime's own settings.
func (o memoryOptions) resolve(env environment) (memorySettings, error) {
	s := memorySettings{gcPercent: o.gcPercent}
	target, err := quantity("--gc-heap-target", o.heapTarget)
	if err != nil {
		return s, err
	}
	s.heapTarget = target
	if env.getenv("GOGC") != "" {
		s.gcPercent, s.heapTarget = -1, 0
	}
	switch {
	case env.getenv("GOMEMLIMIT") != "":
		s.limitFrom = "GOMEMLIMIT"
	case strings.HasSuffix(o.limit, "%"):
		pct, err := strconv.ParseFloat(strings.TrimSuffix(o.limit, "%"), 64)
		if err != nil || pct <= 0 || pct > 100 {
			return s, fmt.Errorf("--memory-limit %q: want a quantity (512Mi), a percentage of the container's memory limit in (0, 100] (90%%) or 0", o.limit)
		}
		// A cgroup file system this cannot read costs the soft limit, not the manager's start.
		container, err := cgroupMemoryLimit(env.root)
		switch {
		case err != nil:
			s.limitFrom = fmt.Sprintf("none: the cgroup's memory limit is unreadable (%v)", err)
		case container > 0:
			s.limit = int64(float64(container) * pct / 100)
			s.limitFrom = fmt.Sprintf("%s of the cgroup's %d bytes", o.limit, container)
		default:
			s.limitFrom = "no cgroup memory limit"
		}
	default:
		if s.limit, err = quantity("--memory-limit", o.limit); err != nil {
			return s, err
		}
		s.limitFrom = "--memory-limit"
	}
	return s, nil
}

// quantity parses a Kubernetes quantity of bytes (96Mi, 100M, 0).
func quantity(flag, v string) (int64, error) {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %w", flag, v, err)
	}
	n, ok := q.AsInt64()
	if !ok || n < 0 {
		return 0, fmt.Errorf("%s %q: want a whole number of bytes", flag, v)
	}
	return n, nil
}

// apply sets the GC percent and the soft memory limit, and starts the tuner that shrinks the GC
// percent as the live heap grows past heapTarget. It returns a function stopping the tuner.
func (s memorySettings) apply() (stop func()) {
	if s.limit > 0 {
		debug.SetMemoryLimit(s.limit)
	}
	if s.gcPercent < 0 {
		return func() {}
	}
	debug.SetGCPercent(s.gcPercent)
	if s.heapTarget <= 0 || s.gcPercent <= MinGCPercent {
		return func() {}
	}
	t := &gcTuner{target: uint64(s.heapTarget), max: s.gcPercent, live: liveHeap, set: debug.SetGCPercent}
	t.arm()
	return t.stop
}

// gcTuner sets the GC percent after every collection so that the next one is due when the heap
// reaches target: GOGC = (target − live) / live, within [MinGCPercent, max]. A small heap keeps
// max (the admission path's setting); a large one collects sooner instead of growing to
// (1 + max/100)× its live size. The Go runtime has no hook after a collection: an unreachable
// sentinel's cleanup is one, re-armed each time.
type gcTuner struct {
	target uint64
	max    int
	live   func() uint64
	set    func(int) int

	mu      sync.Mutex
	stopped bool
}

// gcSentinel holds a pointer so that it is not a tiny allocation, whose cleanup could wait for
// its neighbours.
type gcSentinel struct{ _ *int }

func (t *gcTuner) arm() {
	runtime.AddCleanup(new(gcSentinel), (*gcTuner).collected, t)
}

// collected runs after each collection (in the runtime's cleanup goroutine).
func (t *gcTuner) collected() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.set(t.percent(t.live()))
	t.arm()
}

func (t *gcTuner) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
}

// percent is the GC percent for a live heap of live bytes.
func (t *gcTuner) percent(live uint64) int {
	if live == 0 || live >= t.target {
		return min(MinGCPercent, t.max)
	}
	p := float64(t.target-live) * 100 / float64(live)
	return int(min(float64(t.max), max(MinGCPercent, p)))
}

// liveHeap is the heap marked live by the last collection.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// cgroupMemoryLimit is the memory limit of the cgroup this process runs in, 0 for none: the
// smallest of memory.max (cgroup v2) or memory.limit_in_bytes (v1) of its cgroup and the cgroup's
// ancestors visible under root/sys/fs/cgroup. A container with its own cgroup namespace sees its
// cgroup as "/", whose file is the container's limit.
func cgroupMemoryLimit(root string) (int64, error) {
	raw, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil // not Linux, or no /proc: no limit to follow
	}
	if err != nil {
		return 0, err
	}
	var v1, v2 string
	haveV1, haveV2 := false, false
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2, haveV2 = parts[2], true
		case containsController(parts[1], "memory"):
			v1, haveV1 = parts[2], true
		}
	}
	// A v1 memory controller wins over a v2 line: in a hybrid setup the memory controller is on v1.
	if haveV1 {
		return smallestLimit(filepath.Join(root, "sys/fs/cgroup/memory"), v1, "memory.limit_in_bytes")
	}
	if haveV2 {
		return smallestLimit(filepath.Join(root, "sys/fs/cgroup"), v2, "memory.max")
	}
	return 0, nil
}

func containsController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// unlimitedV1 is above any real limit: cgroup v1 reports "no limit" as the largest page-aligned
// int64 (9223372036854771712).
const unlimitedV1 = math.MaxInt64 / 2

// smallestLimit reads file in mount/cgroup and in each of its ancestors up to mount, and returns
// the smallest limit among them (0: none). Directories that are not there (the path of a cgroup
// namespace's parent, say) are skipped.
func smallestLimit(mount, cgroup, file string) (int64, error) {
	var smallest int64
	for dir := path.Clean("/" + cgroup); ; dir = path.Dir(dir) {
		raw, err := os.ReadFile(filepath.Join(mount, dir, file)) // #nosec G304 G703 -- the kernel's cgroup path of this process, under the cgroup mount
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return 0, err
		default:
			v := strings.TrimSpace(string(raw))
			if v != "max" {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("%s: %q is not a number of bytes", filepath.Join(mount, dir, file), v)
				}
				if n > 0 && n < unlimitedV1 && (smallest == 0 || n < smallest) {
					smallest = n
				}
			}
		}
		if dir == "/" {
			return smallest, nil
		}
	}
}
