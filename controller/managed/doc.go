// Package managed reads the pods a SidecarSet manages (compat §3.3) through a controller-runtime
// client.Reader: the manager's informer cache in the controller, an API client in `sidecarctl
// rollout plan`, so both list the same pods. Which pods a SidecarSet manages is decided by
// rollout.Scope.Manages alone; this package only lists and reads namespaces' labels. It must not
// write, decide anything of a rollout, or import the controller, its manager or cache, which would
// bring them into sidecarctl.
package managed
