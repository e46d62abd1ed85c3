package main

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/internal/testing/testfiles"
)

// fakeRoot writes files (path relative to the root: content) into a temporary directory.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	testfiles.Write(t, root, files)
	return root
}

func TestCgroupMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		want    int64
		wantErr string
	}{
		{name: "no /proc: no limit", files: map[string]string{}},
		{name: "v2, own cgroup namespace", files: map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "536870912\n",
		}, want: 512 << 20},
		{name: "v2, unlimited", files: map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "max\n",
		}},
		{name: "v2, the smallest of the cgroup and its ancestors", files: map[string]string{
			"proc/self/cgroup": "0::/kubepods/burstable/pod1/ctr\n",
			"sys/fs/cgroup/kubepods/burstable/pod1/ctr/memory.max": "max\n",
			"sys/fs/cgroup/kubepods/burstable/pod1/memory.max":     "268435456\n",
			"sys/fs/cgroup/kubepods/memory.max":                    "8589934592\n",
		}, want: 256 << 20},
		{name: "v2, the cgroup's directory not visible: its ancestors", files: map[string]string{
			"proc/self/cgroup":         "0::/../../elsewhere\n",
			"sys/fs/cgroup/memory.max": "1073741824\n",
		}, want: 1 << 30},
		{name: "v2, no memory controller file", files: map[string]string{
			"proc/self/cgroup": "0::/user.slice\n",
		}},
		{name: "v2, garbage", files: map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "lots\n",
		}, wantErr: `"lots" is not a number of bytes`},
		{name: "v1", files: map[string]string{
			"proc/self/cgroup": "12:cpu,cpuacct:/docker/abc\n11:memory:/docker/abc\n1:name=systemd:/docker/abc\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "209715200\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":            "9223372036854771712\n",
		}, want: 200 << 20},
		{name: "v1, unlimited", files: map[string]string{
			"proc/self/cgroup":                           "11:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}},
		{name: "hybrid: the memory controller on v1 wins", files: map[string]string{
			"proc/self/cgroup": "11:memory:/a\n0::/a\n",
			"sys/fs/cgroup/memory/a/memory.limit_in_bytes": "104857600\n",
			"sys/fs/cgroup/a/memory.max":                   "max\n",
		}, want: 100 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cgroupMemoryLimit(fakeRoot(t, tc.files))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestMemoryOptionsResolve(t *testing.T) {
	limited := map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "536870912\n"}
	defaults := memoryOptions{gcPercent: DefaultGCPercent, heapTarget: DefaultGCHeapTarget, limit: DefaultMemoryLimit}
	for _, tc := range []struct {
		name    string
		opts    memoryOptions
		env     map[string]string
		cgroup  map[string]string
		want    memorySettings
		wantErr string
	}{
		{name: "defaults in a container with a limit", opts: defaults, cgroup: limited,
			want: memorySettings{gcPercent: 400, heapTarget: 48 << 20, limit: 483183820, limitFrom: "90% of the cgroup's 536870912 bytes"}},
		{name: "defaults without a container limit", opts: defaults,
			want: memorySettings{gcPercent: 400, heapTarget: 48 << 20, limitFrom: "no cgroup memory limit"}},
		{name: "GOMEMLIMIT wins over --memory-limit", opts: defaults, cgroup: limited, env: map[string]string{"GOMEMLIMIT": "512MiB"},
			want: memorySettings{gcPercent: 400, heapTarget: 48 << 20, limitFrom: "GOMEMLIMIT"}},
		{name: "GOGC wins over --gc-percent and --gc-heap-target", opts: defaults, env: map[string]string{"GOGC": "100"},
			want: memorySettings{gcPercent: -1, limitFrom: "no cgroup memory limit"}},
		{name: "a quantity", opts: memoryOptions{gcPercent: 200, heapTarget: "0", limit: "400Mi"},
			want: memorySettings{gcPercent: 200, limit: 400 << 20, limitFrom: "--memory-limit"}},
		{name: "none", opts: memoryOptions{gcPercent: 400, heapTarget: "128M", limit: "0"}, cgroup: limited,
			want: memorySettings{gcPercent: 400, heapTarget: 128e6, limitFrom: "--memory-limit"}},
		{name: "an unreadable cgroup: no limit, and the manager starts", opts: defaults,
			cgroup: map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "lots\n"},
			want: memorySettings{gcPercent: 400, heapTarget: 48 << 20,
				limitFrom: `none: the cgroup's memory limit is unreadable (` + "%ROOT%" + `/sys/fs/cgroup/memory.max: "lots" is not a number of bytes)`}},
		{name: "a percentage over 100", opts: memoryOptions{heapTarget: "0", limit: "120%"}, wantErr: "a percentage of the container's memory limit in (0, 100]"},
		{name: "a percentage that is not a number", opts: memoryOptions{heapTarget: "0", limit: "x%"}, wantErr: "--memory-limit"},
		{name: "a bad quantity", opts: memoryOptions{heapTarget: "0", limit: "lots"}, wantErr: `--memory-limit "lots"`},
		{name: "a bad heap target", opts: memoryOptions{heapTarget: "-1Mi", limit: "0"}, wantErr: "--gc-heap-target"},
		{name: "a fractional heap target", opts: memoryOptions{heapTarget: "0.5", limit: "0"}, wantErr: "whole number of bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := environment{getenv: func(k string) string { return tc.env[k] }, root: fakeRoot(t, tc.cgroup)}
			got, err := tc.opts.resolve(env)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.want.limitFrom = strings.ReplaceAll(tc.want.limitFrom, "%ROOT%", env.root)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestGCTunerPercent(t *testing.T) {
	tuner := &gcTuner{target: 100 << 20, max: 400}
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{live: 0, want: MinGCPercent}, // nothing measured yet
		{live: 4 << 20, want: 400},    // a small heap: --gc-percent
		{live: 20 << 20, want: 400},   // the goal, 100 MiB, is the target
		{live: 25 << 20, want: 300},   // shrinking: the next collection at 100 MiB
		{live: 50 << 20, want: 100},   //
		{live: 60 << 20, want: 66},    //
		{live: 70 << 20, want: 42},    //
		{live: 90 << 20, want: 25},    // never below MinGCPercent
		{live: 200 << 20, want: 25},   // past the target
		{live: 100 << 20, want: MinGCPercent},
	} {
		assert.Equal(t, tc.want, tuner.percent(tc.live), "live %d MiB", tc.live>>20)
	}
	low := &gcTuner{target: 100 << 20, max: 20}
	assert.Equal(t, 20, low.percent(200<<20), "never above --gc-percent")
}

func TestGCTunerRunsAfterEachCollection(t *testing.T) {
	var calls, lastSet atomic.Int64
	tuner := &gcTuner{target: 100 << 20, max: 400,
		live: func() uint64 { return 50 << 20 },
		set:  func(p int) int { calls.Add(1); lastSet.Store(int64(p)); return 0 },
	}
	tuner.arm()
	for i := range 3 {
		runtime.GC()
		require.Eventually(t, func() bool { return calls.Load() > int64(i) }, 5*time.Second, time.Millisecond, "collection %d", i+1)
	}
	assert.EqualValues(t, 100, lastSet.Load())
	tuner.stop()
	n := calls.Load()
	runtime.GC()
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	assert.LessOrEqual(t, calls.Load(), n+1, "stopped: at most the cleanup already queued")
}

func TestCgroupMemoryLimitOfThisProcess(t *testing.T) {
	limit, err := cgroupMemoryLimit("/")
	require.NoError(t, err, "whatever this machine's cgroups, they are read")
	t.Logf("this process's cgroup memory limit: %d bytes (0: none)", limit)
}
