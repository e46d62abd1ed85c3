package hotupdate

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// findProcesses lists the pids under procDir (normally /proc) whose process is called name: its
// comm, its whole command line (as nginx rewrites it: "nginx: master process nginx") or its
// executable's base name. The agent itself is never a match.
func findProcesses(procDir, name string) ([]int, error) {
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		// A process may exit between ReadDir and these reads; it is then simply not a match.
		comm, _ := os.ReadFile(filepath.Join(procDir, e.Name(), "comm"))
		cmdline, _ := os.ReadFile(filepath.Join(procDir, e.Name(), "cmdline"))
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		switch {
		case strings.TrimSpace(string(comm)) == name,
			len(cmdline) > 0 && strings.Join(args, " ") == name,
			len(cmdline) > 0 && filepath.Base(args[0]) == name:
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
