// Package migratecheck is `sidecarctl migrate check`'s report as text: what OpenKruise left, the
// path of docs/migration.md the cluster takes and what it keeps or loses, then every blocker and
// warning with the command that deals with it.
//
// The findings are internal/migrate's; it must not read a cluster or decide anything itself.
package migratecheck
