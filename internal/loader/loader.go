package loader

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/opa/v1/bundle"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

// ConfigMapSource is the source name of the whitelist converted from OpenKruise's kruise-configuration
// ConfigMap, in metrics, logs and Events.
const ConfigMapSource = v1beta1.KruiseConfigurationName

// The reasons of the Events the loader records on its Event object.
const (
	ReasonPolicyCompileFailed    = "PolicyCompileFailed"
	ReasonBundleActivated        = "BundleActivated"
	ReasonBundleActivationFailed = "BundleActivationFailed"
)

const (
	defaultDebounce        = 200 * time.Millisecond
	defaultCompileMaxDelay = 2 * time.Second
	defaultFoldAfter       = time.Minute
)

// Options configure a Loader. The zero value is usable.
type Options struct {
	// Debounce is the quiet period after a change before recompiling (default 200ms): a rollout that
	// touches many objects compiles once, not once per object.
	Debounce time.Duration
	// MaxDelay bounds how long a stream of changes may postpone a compile (default 2s).
	MaxDelay time.Duration
	// FoldAfter is how long changes must have stopped before SidecarSets' rules compiled apart after
	// a change (engine.Compiler) are folded into a whole compile (default 1 minute): until then
	// each decision evaluates them separately, which costs more (BenchmarkDecide; docs/benchmarks.md,
	// "Policy compiles").
	FoldAfter time.Duration
	// DefaultsAllowed is the feature gate SidecarSetPatchPodMetadataDefaultsAllowed, carried into the
	// whitelist converted from the kruise-configuration ConfigMap.
	DefaultsAllowed bool
	// Logger; the zero value means controller-runtime's logger named "policy-loader".
	Logger logr.Logger
	// Metrics records what the loader does (NewMetrics); nil: NewMetrics(nil), on
	// controller-runtime's metrics.Registry.
	Metrics *Metrics
	// Events, when set together with EventObject, records activation successes and failures as
	// Kubernetes Events regarding EventObject. SetupWithManager fills both in when unset.
	Events      events.EventRecorder
	EventObject runtime.Object
	// Clock drives debouncing; tests inject a fake one.
	Clock clock.Clock
}

// Loader holds everything a policy snapshot is compiled from: SidecarSets, Namespaces and
// ControllerRevisions by name, the kruise-configuration whitelist, and the administrators' bundles by
// source. Every Set/Delete that changes what the bundle reads marks the state dirty; Start compiles
// dirty state (debounced) and swaps the engine's snapshot. Loader is safe for concurrent use.
type Loader struct {
	eng     *engine.Engine
	opts    Options
	log     logr.Logger
	clock   clock.Clock
	metrics *Metrics
	// wake carries "something changed" to the compile loop; one pending signal is enough because
	// the loop reads the whole state when it compiles.
	wake chan struct{}
	// compiler keeps what the snapshot in force was compiled from; only the compile loop uses it.
	compiler engine.Compiler

	mu sync.Mutex
	// gen counts changes; the loop compiles when it differs from the generation last attempted.
	gen           uint64
	attemptedGen  uint64
	attempted     bool
	clusterSynced bool
	sidecarSets   map[string]*v1beta1.SidecarSet
	namespaces    map[string]*corev1.Namespace
	revisions     map[string]*appsv1.ControllerRevision
	whitelistCM   *string // the ConfigMap's whitelist value last converted; nil: key or ConfigMap absent
	sources       map[string]*source
	order         []string // registration order: admin bundles load in a stable order
	ready         bool
	lastErr       error
	events        events.EventRecorder
	eventObject   runtime.Object
}

// source is one supplier of an administrators' bundle.
type source struct {
	name string
	// reported: the source has offered a bundle at least once. Until every registered source has,
	// no snapshot is compiled, so a webhook never serves without an administrator's gates.
	reported bool
	offered  *bundle.Bundle // the latest verified bundle
	active   *bundle.Bundle // the bundle in the snapshot in force
	rejected *bundle.Bundle // an offered bundle that did not compile; not retried until a source offers anew
	// refused: the newest bundle of this source was refused (unreadable, unverified, over the
	// limits, not compiling); cleared by the next bundle offered.
	refused bool
}

// New returns a Loader feeding eng. Nothing is compiled before Start runs and SetClusterSynced
// has been called.
func New(eng *engine.Engine, opts Options) (*Loader, error) {
	if eng == nil {
		return nil, errors.New("loader: nil engine")
	}
	if opts.Debounce <= 0 {
		opts.Debounce = defaultDebounce
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = defaultCompileMaxDelay
	}
	if opts.MaxDelay < opts.Debounce {
		opts.MaxDelay = opts.Debounce
	}
	if opts.FoldAfter <= 0 {
		opts.FoldAfter = defaultFoldAfter
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	log := opts.Logger
	if log.GetSink() == nil {
		log = ctrllog.Log.WithName("policy-loader")
	}
	if opts.Metrics == nil {
		var err error
		if opts.Metrics, err = NewMetrics(nil); err != nil {
			return nil, err
		}
	}
	s := &Loader{
		eng:         eng,
		opts:        opts,
		log:         log,
		clock:       opts.Clock,
		metrics:     opts.Metrics,
		wake:        make(chan struct{}, 1),
		sidecarSets: map[string]*v1beta1.SidecarSet{},
		namespaces:  map[string]*corev1.Namespace{},
		revisions:   map[string]*appsv1.ControllerRevision{},
		sources:     map[string]*source{},
		events:      opts.Events,
		eventObject: opts.EventObject,
	}
	// Without a ConfigMap the whitelist is "not found" (plus the feature gate), exactly as when the
	// ConfigMap exists without the key; the informer replaces it if the ConfigMap exists.
	doc, err := manifest.Whitelist(nil, opts.DefaultsAllowed)
	if err != nil {
		return nil, err
	}
	s.sources[ConfigMapSource] = &source{name: ConfigMapSource, reported: true, offered: bundles.DataBundle(bundles.WhitelistRoot, configMapRevision(nil), doc)}
	s.metrics.activations.WithLabelValues(ConfigMapSource, resultSuccess)
	s.metrics.activations.WithLabelValues(ConfigMapSource, resultFailure)
	s.metrics.refused.WithLabelValues(ConfigMapSource).Set(0)
	return s, nil
}

// NeedLeaderElection is false: every replica serves webhooks and needs its own snapshot.
func (s *Loader) NeedLeaderElection() bool { return false }

// changedLocked bumps the generation and wakes the loop. Callers hold s.mu.
func (s *Loader) changedLocked() {
	s.gen++
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// SetSidecarSet stores ss defaulted and hashed: ss itself, shared with the informer's cache and
// read-only, when the defaulting webhook (ours or OpenKruise's, which agree) already made it so,
// else a defaulted copy (one created while no webhook ran). An update that changes nothing the
// policies or the injection read (status counters, resourceVersion) does not recompile.
func (s *Loader) SetSidecarSet(ss *v1beta1.SidecarSet) error {
	if ss == nil {
		return errors.New("loader: nil SidecarSet")
	}
	c := ss.DeepCopy()
	c.ManagedFields = nil
	if err := defaults.SidecarSetAndHash(c); err != nil {
		return fmt.Errorf("SidecarSet/%s: %w", ss.Name, err)
	}
	if reflect.DeepEqual(c, ss) {
		c = ss
	}
	put(s, s.sidecarSets, c.Name, c, sameSidecarSet)
	return nil
}

// sameSidecarSet compares what the policy compile (bundles.Builder) and the mutation read: labels,
// annotations (canary, base, hashes), the spec, and status.latestRevision (written into injected
// pods).
func sameSidecarSet(a, b *v1beta1.SidecarSet) bool {
	return apiequality.Semantic.DeepEqual(a.Labels, b.Labels) &&
		apiequality.Semantic.DeepEqual(a.Annotations, b.Annotations) &&
		apiequality.Semantic.DeepEqual(a.Spec, b.Spec) &&
		a.Status.LatestRevision == b.Status.LatestRevision
}

// DeleteSidecarSet removes a SidecarSet by name.
func (s *Loader) DeleteSidecarSet(name string) { remove(s, s.sidecarSets, name) }

// SetNamespace stores ns, shared with the informer's cache and read-only: namespaceSelector reads
// its labels.
func (s *Loader) SetNamespace(ns *corev1.Namespace) {
	if ns != nil {
		put(s, s.namespaces, ns.Name, ns, func(a, b *corev1.Namespace) bool { return maps.Equal(a.Labels, b.Labels) })
	}
}

// DeleteNamespace removes a Namespace by name.
func (s *Loader) DeleteNamespace(name string) { remove(s, s.namespaces, name) }

// SetRevision stores cr itself, shared with the informer's cache and read-only; a copy without the
// managed fields of a cache that keeps them.
func (s *Loader) SetRevision(cr *appsv1.ControllerRevision) {
	if cr == nil {
		return
	}
	if len(cr.ManagedFields) > 0 {
		cr = cr.DeepCopy()
		cr.ManagedFields = nil
	}
	put(s, s.revisions, cr.Name, cr, func(a, b *appsv1.ControllerRevision) bool {
		return maps.Equal(a.Labels, b.Labels) && a.Revision == b.Revision && apiequality.Semantic.DeepEqual(a.Data, b.Data)
	})
}

// DeleteRevision removes a ControllerRevision by name.
func (s *Loader) DeleteRevision(name string) { remove(s, s.revisions, name) }

// put stores v under name in one of the Loader's object maps and wakes the compile loop, unless
// same says the stored object already reads the same: updates that change nothing compiled or
// injected (status counters, resourceVersion) cost no compile.
func put[T any](s *Loader, m map[string]T, name string, v T, same func(old, v T) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := m[name]; ok && same(old, v) {
		return
	}
	m[name] = v
	s.changedLocked()
}

// remove deletes name from one of the Loader's object maps, waking the compile loop if it was there.
func remove[T any](s *Loader, m map[string]T, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := m[name]; ok {
		delete(m, name)
		s.changedLocked()
	}
}

// SetConfigMap converts OpenKruise's kruise-configuration ConfigMap (nil: absent) into the whitelist
// data document with manifest.Whitelist. It is used only while no administrators' bundle provides the
// whitelist root. A value that does not convert is refused and the previous whitelist keeps serving.
func (s *Loader) SetConfigMap(cm *corev1.ConfigMap) {
	var value *string
	if cm != nil {
		if v, ok := cm.Data[v1beta1.PatchPodMetadataWhiteListKey]; ok {
			value = &v
		}
	}
	err := func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if (value == nil && s.whitelistCM == nil) || (value != nil && s.whitelistCM != nil && *value == *s.whitelistCM) {
			return nil // another key changed: nothing the policies read
		}
		s.whitelistCM = value
		doc, err := manifest.Whitelist(cm, s.opts.DefaultsAllowed)
		if err != nil {
			return err
		}
		src := s.sources[ConfigMapSource]
		src.offered = bundles.DataBundle(bundles.WhitelistRoot, configMapRevision(cm), doc)
		s.setRefusedLocked(src, false)
		s.changedLocked()
		return nil
	}()
	if err != nil {
		s.refuse(ConfigMapSource, err)
	}
}

// configMapRevision names the converted whitelist after the ConfigMap version it came from.
func configMapRevision(cm *corev1.ConfigMap) string {
	if cm == nil {
		return "configmap-absent"
	}
	return "configmap-" + cm.ResourceVersion
}

var sourceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// RegisterSource declares an administrators' bundle source. No snapshot is compiled until every
// registered source has offered a bundle (fetched, read from disk or restored from its persisted
// copy): serving without an administrator's gates would inject pods the gates exclude. The name is
// a metrics label and a directory name under the persistence directory.
func (s *Loader) RegisterSource(name string) error {
	if !sourceName.MatchString(name) || strings.Contains(name, "..") {
		return fmt.Errorf("loader: invalid source name %q (letters, digits, '.', '_', '-'; at most 63)", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.sources[name]; dup {
		return fmt.Errorf("loader: source %q is registered twice", name)
	}
	s.sources[name] = &source{name: name}
	s.order = append(s.order, name)
	s.metrics.activations.WithLabelValues(name, resultSuccess)
	s.metrics.activations.WithLabelValues(name, resultFailure)
	s.metrics.refused.WithLabelValues(name).Set(0)
	s.metrics.refusedPolls.WithLabelValues(name)
	return nil
}

// SetBundle offers b, already verified, as the bundle of a registered source. It replaces the
// source's previous bundle once a snapshot including it compiles; if it does not compile, the
// previous one keeps serving.
func (s *Loader) SetBundle(sourceName string, b *bundle.Bundle) error {
	if b == nil {
		return fmt.Errorf("loader: source %q offered no bundle", sourceName)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	src, ok := s.sources[sourceName]
	if !ok || sourceName == ConfigMapSource {
		return fmt.Errorf("loader: unknown bundle source %q", sourceName)
	}
	src.offered = b
	src.reported = true
	s.setRefusedLocked(src, false)
	// A bundle that failed may have failed because of another source's bundle (overlapping roots);
	// any new offer gives every rejected bundle another chance.
	for _, o := range s.sources {
		o.rejected = nil
	}
	s.changedLocked()
	return nil
}

// SetClusterSynced tells the Loader that the informers have delivered every existing object. Until
// then a snapshot would miss SidecarSets and inject too little.
func (s *Loader) SetClusterSynced() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.clusterSynced {
		s.clusterSynced = true
		s.changedLocked()
	}
}

// Ready returns nil once a snapshot compiled by this Loader is serving, else why not.
func (s *Loader) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready {
		return nil
	}
	var why []string
	if !s.clusterSynced {
		why = append(why, "waiting for informers to sync")
	}
	if p := s.pendingLocked(); len(p) > 0 {
		why = append(why, "waiting for bundle sources "+strings.Join(p, ", "))
	}
	if s.lastErr != nil {
		why = append(why, "last compile failed: "+s.lastErr.Error())
	}
	if len(why) == 0 {
		why = append(why, "first compile pending")
	}
	return errors.New("policy snapshot not ready: " + strings.Join(why, "; "))
}

// Check is Ready as a healthz.Checker, for the manager's readyz endpoint.
func (s *Loader) Check(*http.Request) error { return s.Ready() }

func (s *Loader) pendingLocked() []string {
	var p []string
	for _, name := range s.order {
		if !s.sources[name].reported {
			p = append(p, name)
		}
	}
	return p
}

// Start runs the compile loop until ctx ends: wait for a change, let changes settle for the
// debounce period (at most MaxDelay), compile, swap. It never returns an error: a failed compile keeps
// the previous snapshot and is retried on the next change.
func (s *Loader) Start(ctx context.Context) error {
	for {
		var fold <-chan time.Time
		var foldTimer clock.Timer
		if cur := s.eng.Current(); cur != nil && cur.Partial() > 0 {
			foldTimer = s.clock.NewTimer(s.opts.FoldAfter)
			fold = foldTimer.C()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-fold:
			s.fold(ctx)
			continue
		case <-s.wake:
		}
		if foldTimer != nil {
			foldTimer.Stop()
		}
		s.mu.Lock()
		due := s.gen != s.attemptedGen || !s.attempted
		first := !s.attempted
		s.mu.Unlock()
		if !due {
			continue // a signal for changes an earlier compile already read
		}
		// The first compile runs at once: it waits for the informers' initial lists, which arrive
		// before SetClusterSynced, so there is nothing left to coalesce and readiness comes sooner.
		if !first && !s.settle(ctx) {
			return nil
		}
		s.compile(ctx)
	}
}

// fold swaps in the snapshot that decides with one whole compile instead of a partial one: the same
// revision and decisions, cheaper per decision. Changes stopped FoldAfter ago.
func (s *Loader) fold(ctx context.Context) {
	start := s.clock.Now()
	snap, err := s.compiler.Fold(ctx)
	elapsed := s.clock.Since(start)
	if err != nil {
		if ctx.Err() == nil {
			// Should not happen (the same rules compiled before, in parts); the partial snapshot
			// keeps serving, and the loop tries again FoldAfter later.
			s.log.Error(err, "folding the policy index failed; the partial snapshot keeps serving", "duration", elapsed)
			s.metrics.compileDuration.WithLabelValues(resultFailure).Observe(elapsed.Seconds())
			s.metrics.compiles.WithLabelValues(resultFailure).Inc()
		}
		return
	}
	if snap != nil {
		s.eng.Swap(snap)
		s.metrics.partial.Set(0)
		s.log.Info("policy index folded into one compile", "revision", snap.Revision(), "duration", elapsed)
	}
}

// settle waits until no change arrived for Debounce, or MaxDelay passed; false when ctx ended.
func (s *Loader) settle(ctx context.Context) bool {
	deadline := s.clock.Now().Add(s.opts.MaxDelay)
	for {
		wait := min(s.opts.Debounce, deadline.Sub(s.clock.Now()))
		if wait <= 0 {
			return true
		}
		t := s.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-s.wake:
			t.Stop() // another change: the quiet period starts again
		case <-t.C():
			return true
		}
	}
}

// plan is one compile attempt's inputs, read under the lock.
type plan struct {
	state    bundles.State
	admin    []*sourceBundle // candidates: each source's offered bundle unless it was rejected
	fallback []*sourceBundle // the same with the active bundle for every source whose bundle is new; nil if impossible
}

type sourceBundle struct {
	source string
	bundle *bundle.Bundle
}

func (s *Loader) compile(ctx context.Context) {
	s.mu.Lock()
	s.attemptedGen = s.gen
	// Before the first snapshot, wait for everything it must contain. Afterwards a source registered
	// late is simply absent until it offers a bundle, as it was from the snapshot in force.
	if !s.ready && (!s.clusterSynced || len(s.pendingLocked()) > 0) {
		s.mu.Unlock()
		return // SetClusterSynced and SetBundle wake the loop again
	}
	s.attempted = true
	p := s.planLocked()
	s.mu.Unlock()

	start := s.clock.Now()
	snap, err := s.build(ctx, p.state, p.admin)
	var rejected []string
	var rejectErr error
	if err != nil && p.fallback != nil && ctx.Err() == nil {
		// Administrators' new bundles took part: keep the cluster's changes flowing with their
		// previous bundles, and refuse the new ones.
		firstErr := err
		if snap, err = s.build(ctx, p.state, p.fallback); err == nil {
			rejected = s.newSources(p.admin)
			rejectErr = fmt.Errorf("policy compile failed with this bundle: %w", firstErr)
			if len(rejected) > 1 {
				// Several sources changed at once; which one broke the compile is not known.
				rejectErr = fmt.Errorf("policy compile failed with the new bundles of %s together: %w", strings.Join(rejected, ", "), firstErr)
			}
			p.admin = p.fallback
		} else {
			err = firstErr
		}
	}
	if err != nil && ctx.Err() != nil {
		return // shutting down: the compile was cancelled, not wrong
	}
	elapsed := s.clock.Since(start)
	// Counters move after what they count is visible (snapshot, Events), readiness after them:
	// whoever polls either then sees a consistent state.
	if err != nil {
		s.mu.Lock()
		s.lastErr = err
		s.mu.Unlock()
		s.log.Error(err, "policy compile failed; the previous snapshot keeps serving", "duration", elapsed)
		s.event(corev1.EventTypeWarning, ReasonPolicyCompileFailed, "Compile", "policy compile failed, previous snapshot keeps serving: %v", err)
		s.metrics.compileDuration.WithLabelValues(resultFailure).Observe(elapsed.Seconds())
		s.metrics.compiles.WithLabelValues(resultFailure).Inc()
		return
	}
	if snap != nil {
		s.eng.Swap(snap)
		s.metrics.partial.Set(float64(snap.Partial()))
		s.metrics.snapshotInfo.Reset()
		s.metrics.snapshotInfo.WithLabelValues(snap.Revision()).Set(1)
		s.log.Info("policy snapshot swapped", "revision", snap.Revision(), "adminRevisions", snap.AdminRevisions(),
			"sidecarSets", len(p.state.SidecarSets), "compiledApart", snap.Partial(), "duration", elapsed)
	}
	s.activate(p.admin, rejected)
	for _, name := range rejected {
		s.refuse(name, rejectErr)
	}
	s.metrics.compileDuration.WithLabelValues(resultSuccess).Observe(elapsed.Seconds())
	s.metrics.lastSuccess.Set(float64(s.clock.Now().Unix()))
	s.metrics.compiles.WithLabelValues(resultSuccess).Inc()
	// Ready comes last: a replica turning ready has already said what serves.
	s.mu.Lock()
	s.ready = true
	s.lastErr = nil
	s.mu.Unlock()
}

// planLocked reads the state for one compile, SidecarSets in name order so that identical state gives
// an identical bundle revision on every replica.
func (s *Loader) planLocked() plan {
	var p plan
	for _, name := range slices.Sorted(maps.Keys(s.sidecarSets)) {
		p.state.SidecarSets = append(p.state.SidecarSets, s.sidecarSets[name])
	}
	for _, name := range slices.Sorted(maps.Keys(s.namespaces)) {
		p.state.Namespaces = append(p.state.Namespaces, s.namespaces[name])
	}
	for _, name := range slices.Sorted(maps.Keys(s.revisions)) {
		p.state.ControllerRevisions = append(p.state.ControllerRevisions, s.revisions[name])
	}
	candidate := func(src *source) *bundle.Bundle {
		if src.offered == src.rejected {
			return src.active
		}
		return src.offered
	}
	p.admin = s.adminLocked(candidate)
	fallbackPossible, anyNew := true, false
	for _, name := range s.order {
		src := s.sources[name]
		if c := candidate(src); c != src.active {
			anyNew = true
			// Before the first snapshot a source whose first bundle fails has no previous one, and
			// becoming ready without it would drop the administrator's gates: the compile fails
			// instead. Once ready, leaving out a bundle that never served changes nothing.
			fallbackPossible = fallbackPossible && (src.active != nil || s.ready)
		}
	}
	if anyNew && fallbackPossible {
		p.fallback = s.adminLocked(func(src *source) *bundle.Bundle {
			if src.name == ConfigMapSource {
				return src.offered // data converted from the ConfigMap cannot break a compile
			}
			return src.active
		})
	}
	return p
}

// adminLocked lists each source's bundle chosen by pick, in registration order; the ConfigMap's
// whitelist comes last and only when no bundle provides the whitelist root.
func (s *Loader) adminLocked(pick func(*source) *bundle.Bundle) []*sourceBundle {
	var out []*sourceBundle
	for _, name := range s.order {
		if b := pick(s.sources[name]); b != nil {
			out = append(out, &sourceBundle{name, b})
		}
	}
	if injector.NeedsWhitelist(bundlesOf(out)) {
		if b := pick(s.sources[ConfigMapSource]); b != nil {
			out = append(out, &sourceBundle{ConfigMapSource, b})
		}
	}
	return out
}

// build compiles a snapshot with the Loader's Compiler, which recompiles only what changed since
// the snapshot in force. It returns nil when that snapshot is still the one (nothing it holds
// changed).
func (s *Loader) build(ctx context.Context, st bundles.State, admin []*sourceBundle) (*engine.Snapshot, error) {
	snap, err := injector.Snapshot(ctx, injector.Policies{State: st, Admin: bundlesOf(admin), Compiler: &s.compiler})
	if err != nil || snap == s.eng.Current() {
		return nil, err
	}
	return snap, nil
}

// newSources names the sources (not the ConfigMap) whose bundle in admin is not the active one.
func (s *Loader) newSources(admin []*sourceBundle) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, a := range admin {
		if a.source != ConfigMapSource && s.sources[a.source].active != a.bundle {
			out = append(out, a.source)
		}
	}
	return out
}

// activate records that the bundles in admin serve now, marks the rejected ones, and reports every
// source whose bundle changed.
func (s *Loader) activate(admin []*sourceBundle, rejected []string) {
	type activation struct{ source, revision string }
	var done []activation
	s.mu.Lock()
	in := map[string]*bundle.Bundle{}
	for _, a := range admin {
		in[a.source] = a.bundle
	}
	for _, name := range rejected {
		s.sources[name].rejected = s.sources[name].offered
	}
	s.metrics.bundleInfo.Reset()
	for name, src := range s.sources {
		b := in[name]
		if b != nil {
			s.metrics.bundleInfo.WithLabelValues(name, b.Manifest.Revision).Set(1)
		}
		if src.active != b && b != nil {
			done = append(done, activation{name, b.Manifest.Revision})
		}
		src.active = b
	}
	s.mu.Unlock()
	slices.SortFunc(done, func(a, b activation) int { return strings.Compare(a.source, b.source) })
	for _, a := range done {
		s.log.Info("bundle activated", "source", a.source, "revision", a.revision)
		s.event(corev1.EventTypeNormal, ReasonBundleActivated, "Activate", "bundle from source %s (revision %q) activated", a.source, a.revision)
		s.metrics.activations.WithLabelValues(a.source, resultSuccess).Inc()
	}
}

// refuse reports a bundle that cannot serve (unverifiable, unreadable, over the limits, not
// compiling); the source's previous bundle keeps serving. Sources call it once per bundle.
func (s *Loader) refuse(sourceName string, err error) {
	s.mu.Lock()
	if src, ok := s.sources[sourceName]; ok {
		s.setRefusedLocked(src, true)
	}
	s.mu.Unlock()
	s.log.Error(err, "bundle refused; the source's last good bundle keeps serving", "source", sourceName)
	s.event(corev1.EventTypeWarning, ReasonBundleActivationFailed, "Activate", "bundle from source %s refused, last good bundle keeps serving: %v", sourceName, err)
	s.metrics.activations.WithLabelValues(sourceName, resultFailure).Inc()
}

func (s *Loader) setRefusedLocked(src *source, refused bool) {
	src.refused = refused
	v := 0.0
	if refused {
		v = 1
	}
	s.metrics.refused.WithLabelValues(src.name).Set(v)
}

// sourceAnswered records that a source answered in full (a bundle, refused or not, or "unchanged"),
// after the source has handled the answer: a poll that finds the source's newest bundle refused,
// refused by this poll or unchanged since, is counted.
func (s *Loader) sourceAnswered(sourceName string) {
	s.metrics.sourceSuccess.WithLabelValues(sourceName).Set(float64(s.clock.Now().Unix()))
	s.mu.Lock()
	defer s.mu.Unlock()
	if src, ok := s.sources[sourceName]; ok && src.refused {
		s.metrics.refusedPolls.WithLabelValues(sourceName).Inc()
	}
}

// sourceError reports that a source could not be read or reached; nothing was refused.
func (s *Loader) sourceError(sourceName string, err error) {
	s.log.Error(err, "bundle source unavailable; its last good bundle keeps serving", "source", sourceName)
	s.metrics.sourceErrors.WithLabelValues(sourceName).Inc()
}

func (s *Loader) event(eventType, reason, action, note string, args ...any) {
	s.mu.Lock()
	rec, obj := s.events, s.eventObject
	s.mu.Unlock()
	if rec == nil || obj == nil {
		return
	}
	// Event notes are limited to 1 kB by the API server; compile errors can be long.
	msg := fmt.Sprintf(note, args...)
	if len(msg) > 1000 {
		msg = strings.ToValidUTF8(msg[:997], "") + "..."
	}
	rec.Eventf(obj, nil, eventType, reason, action, "%s", msg)
}

// setEvents installs an Event recorder and object unless Options set them.
func (s *Loader) setEvents(rec events.EventRecorder, obj runtime.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.events == nil {
		s.events = rec
	}
	if s.eventObject == nil {
		s.eventObject = obj
	}
}

func bundlesOf(bs []*sourceBundle) []*bundle.Bundle {
	out := make([]*bundle.Bundle, len(bs))
	for i, b := range bs {
		out[i] = b.bundle
	}
	return out
}
