// Package wait is the tests' "eventually": retry a check against a system that converges
// asynchronously (a manager compiling policies, a controller rolling out, kwok reporting status)
// until it passes or a deadline. It owns nothing else and must not be used outside tests' helpers.
package wait

import (
	"testing"
	"time"
)

// Interval is how often Until retries.
const Interval = 100 * time.Millisecond

// Until retries f every Interval until it returns nil, and fails t with f's last error, naming
// what was awaited, when timeout passes first.
func Until(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(Interval)
	}
	t.Fatalf("%s: still failing after %s: %v", what, timeout, err)
}
