// Package promreg registers Prometheus collectors so that a component built twice on one registry
// (a manager restarted in one process, tests) shares its series instead of failing.
//
// It owns only that registration rule; the metrics themselves belong to the packages that record
// them (docs/operations.md, "Metrics").
package promreg
