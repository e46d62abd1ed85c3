package wait

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	_ = args
}

func TestUntil(t *testing.T) {
	calls := 0
	Until(t, time.Second, "third call", func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	assert.Equal(t, 3, calls)

	r := &recorder{}
	Until(r, 3*Interval, "never", func() error { return errors.New("nope") })
	assert.Equal(t, "%s: still failing after %s: %v", r.failed)
}
