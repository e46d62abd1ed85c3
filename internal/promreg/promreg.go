package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c, or returns the collector of the same description registered before.
func Register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing, nil
		}
	}
	var zero T
	return zero, err
}
