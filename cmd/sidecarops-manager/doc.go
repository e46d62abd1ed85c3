// Command sidecarops-manager runs the sidecarops admission webhooks (pod injection, SidecarSet
// defaulting and validation), keeps their policy snapshot current, and on the elected replica runs
// the SidecarSet controller (docs/operations.md). It owns flags only: it parses them into
// manager.Options, and package manager assembles the process.
package main
