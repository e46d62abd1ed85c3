package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc/stat: USER_HZ, 100 on every Linux architecture Go supports.
const userHZ = 100

// machineBusy is the CPU time all processes of the machine have used since boot (/proc/stat:
// user, nice, system, irq, softirq, steal); false if unknown. Minus this process's own CPU it
// tells whether other work shared the CPUs during a run, which makes its figures unreliable.
func machineBusy() (time.Duration, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return 0, false
	}
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, false
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system (idle iowait) irq softirq steal
		v, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0, false
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / userHZ, true
}
