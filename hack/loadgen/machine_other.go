//go:build !linux

package main

import "time"

// machineBusy is unknown here: the report leaves out what other processes used.
func machineBusy() (time.Duration, bool) { return 0, false }
