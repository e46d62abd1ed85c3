package mutation

import "fmt"

// fieldError names what could not be injected: the SidecarSet and the field of it at fault, or the
// pod field when the pod itself is unusable. Webhook and CLI show it as is, so it has to point the
// user at the exact object and field to fix.
type fieldError struct {
	sidecarSet string // empty when the pod is at fault
	field      string
	err        error
}

func (e *fieldError) Error() string {
	if e.sidecarSet == "" {
		return fmt.Sprintf("pod %s: %v", e.field, e.err)
	}
	return fmt.Sprintf("SidecarSet %q %s: %v", e.sidecarSet, e.field, e.err)
}

func (e *fieldError) Unwrap() error { return e.err }

func fieldErr(sidecarSet, field string, err error) error {
	return &fieldError{sidecarSet: sidecarSet, field: field, err: err}
}

func podFieldErr(field string, err error) error {
	return &fieldError{field: field, err: err}
}
