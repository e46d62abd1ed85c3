// Package loader keeps the engine's policy snapshot current inside the manager.
//
// It owns the manager-side inputs of a snapshot and their life cycle: SidecarSets, Namespaces and
// the SidecarSets' ControllerRevisions fed from the manager's informer cache, administrators'
// bundles (whitelist, gates) from files, OPA bundle services and OpenKruise's kruise-configuration
// ConfigMap, the debounced recompile and atomic swap, readiness, and the metrics, logs and Events
// that tell an operator which bundles serve. It is the in-cluster twin of cmd/sidecarctl's
// workspace, built from the same pieces: defaults.SidecarSetAndHash, bundles.Compile, engine.Prepare,
// manifest.Whitelist, bundles.Read/ReadBytes.
//
// It never decides anything (the policies do, through package engine) and never mutates pods
// (package mutation does). It does not build bundles (package bundles) nor write to the API server:
// it reads the manager's cache only, and records Events.
//
// # Shape
//
// Loader is a pure core that needs no Kubernetes: Set*/Delete* store copies and mark it dirty; Start
// runs the compile loop. SetupWithManager wires it to a controller-runtime manager with informer
// event handlers (not reconcilers: a reconciler would re-read each object by key, while the handler
// already holds the cached object, and the Loader needs every object, not a work queue). FileSource
// and HTTPSource offer verified bundles to the Loader. Every runnable reports NeedLeaderElection
// false: webhooks serve on every replica, and each replica needs its own snapshot.
//
// # Compiling
//
// A change wakes the loop, which waits for a quiet period (Options.Debounce, default 200ms; never
// longer than Options.MaxDelay, default 2s, under a stream of changes), then compiles with
// bundles.Compile and engine.Prepare and swaps. The first compile does not wait: it runs once the
// informers have synced and every registered bundle source has offered a bundle, so readiness comes
// as early as it safely can.
//
// Incremental where it pays: a compile is whole (bundles.Compile and engine.Prepare take the full
// state; about 1 s at 10,000 SidecarSets, docs/benchmarks.md), so the savings are in not compiling.
// SidecarSets are defaulted and hashed once per change, not per compile; updates that change
// nothing the bundle or the injection reads are dropped on arrival (SidecarSet status counters,
// which OpenKruise's controller rewrites constantly, Namespace annotations, resourceVersion-only
// resyncs); a compile whose bundle revision (a content hash) and administrators' bundles equal the
// snapshot's skips engine.Prepare and the swap.
//
// A failed compile keeps the previous snapshot, is logged, counted, recorded as an Event, and retried
// on the next change. When it failed with new administrators' bundles, the loop compiles again
// with those sources' previous bundles: cluster changes keep flowing, the new bundles are refused
// (each source's activation failure is reported) and not retried until a source offers a new
// bundle. Before the first snapshot, a source whose first bundle fails has no previous one:
// becoming ready without it would drop the administrator's gates, so the compile fails and the
// replica stays unready until the source offers a bundle that compiles.
//
// # Readiness
//
// Ready (and Check, a healthz.Checker added as ReadyzCheckName) fails until a snapshot compiled by
// this Loader serves; afterwards it stays ready through failed compiles, because the previous
// snapshot still serves. It waits for the informers' initial lists (a snapshot without them would
// miss SidecarSets) and for every registered source.
//
// # Administrators' bundles
//
// Sources: FileSource (directory or .tar.gz, polled for content changes), HTTPSource (OPA's
// download.Downloader with ETag and 304 handling), and the kruise-configuration ConfigMap's
// SidecarSet_PatchPodMetadata_WhiteList, converted with manifest.Whitelist into a data bundle with
// root "whitelist" that is used only while no administrators' bundle provides that root (as in
// sidecarctl).
//
// With a Verification, every bundle must carry a valid signature; an unsigned, tampered or wrongly
// scoped bundle is refused and the source's last good bundle keeps serving. With a persistence
// directory each source keeps its last good bundle bytes in <dir>/<source>/bundle.tar.gz (the HTTP
// source also its ETag), verified again when restored at start, so a restart while the bundle
// server is down or the file is gone starts with it. Verification carries the keys in two forms:
// bundles' (authoritative) and OPA's, without which OPA's downloader refuses to parse any signed
// bundle; bundles.Verification keeps its OPA form unexported.
//
// OPA's downloader parses an HTTP bundle before bundles.ReadBytes does, so HTTP bundles must be
// bundles stock OPA accepts: without verification keys a signed bundle is refused ("verification key
// not provided"), and a Rego test module outside the bundle's roots is refused (build with
// `opa build --ignore '*_test.rego'`); a FileSource accepts the first unverified and skips the second.
//
// # Observability
//
// Metrics (registry Options.Registerer, default controller-runtime's):
//
//	sidecarops_policy_compile_duration_seconds{result}          histogram of bundles.Compile + engine.Prepare
//	sidecarops_policy_compiles_total{result}                   success | failure
//	sidecarops_policy_last_compile_success_timestamp_seconds   gauge
//	sidecarops_policy_snapshot_info{revision}                  1 for the compiled bundle serving
//	sidecarops_bundle_activations_total{source,result}         success | failure (refused or not compiling)
//	sidecarops_bundle_info{source,revision}                    1 for each source's bundle serving
//	sidecarops_bundle_source_errors_total{source}              file missing, server unreachable or erroring
//
// Events (events/v1, reporting controller EventSource) on activation success (BundleActivated),
// refusal (BundleActivationFailed) and failed compiles (PolicyCompileFailed). They are recorded on
// this replica's Pod when ManagerOptions names it, because every replica activates on its own and
// `kubectl describe pod` then shows what that replica serves (it matches Events by UID, so give
// PodUID too); otherwise on the manager's Namespace (stored in namespace "default", as Events about
// cluster-scoped objects are).
// The kruise-configuration ConfigMap was not chosen: it may not exist, and it is unrelated to gate
// bundles.
package loader
