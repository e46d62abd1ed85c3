package agenttest

import (
	"sync/atomic"

	"github.com/go-logr/logr"
)

// LogLines is a logr.LogSink counting the lines logged at verbosity 0, ERROR lines apart, and
// discarding them: for tests of what a flood of requests costs the log. Use it as
// logr.New(&lines).
type LogLines struct{ Errors, Infos atomic.Int64 }

// Init implements logr.LogSink.
func (*LogLines) Init(logr.RuntimeInfo) {}

// Enabled implements logr.LogSink: verbosity 0 only, as the agent runs by default.
func (*LogLines) Enabled(level int) bool { return level == 0 }

// Info implements logr.LogSink.
func (l *LogLines) Info(int, string, ...any) { l.Infos.Add(1) }

// Error implements logr.LogSink.
func (l *LogLines) Error(error, string, ...any) { l.Errors.Add(1) }

// WithValues implements logr.LogSink.
func (l *LogLines) WithValues(...any) logr.LogSink { return l }

// WithName implements logr.LogSink.
func (l *LogLines) WithName(string) logr.LogSink { return l }
