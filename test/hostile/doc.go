// Package hostile replays attacks on the webhook port against the manager as a process (the
// binary users run, with the memory limit its Deployment sets) beside a real API server: floods of
// connections that stall their bodies or their headers, while ordinary pod reviews must go on being
// answered and the process's peak memory must stay within what its limits add up to
// (docs/security.md, "Memory the webhook port can cost").
package hostile
