package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/bundle"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/findings"
	"github.com/sidecarops/sidecarops/policies/strict"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
	"github.com/sidecarops/sidecarops/sidecarset/versions"
)

// Options say what to read and how; the command line's flags, checked by the command.
type Options struct {
	// Files are the paths of -f (manifest.Stdin for standard input), read from Stdin; Reader bounds
	// them and names its bounds.
	Files  []string
	Stdin  io.Reader
	Reader manifest.Reader
	// StdinName is the file standard input's documents are reported in, unless helm's Source
	// comments say.
	StdinName string
	// AdminBundles are the administrators' bundles, verified against VerificationKeys (when any)
	// with VerificationAlg and VerificationScope.
	AdminBundles      []string
	VerificationKeys  []string
	VerificationAlg   string
	VerificationScope string
	// DefaultsAllowed is the feature gate SidecarSetPatchPodMetadataDefaultsAllowed.
	DefaultsAllowed bool
	// Stderr receives the warnings as they are found, unless KeepWarnings keeps them for the
	// command to report (check, which prints each with its rule, or not at all when silenced).
	Stderr       io.Writer
	KeepWarnings bool
	// StrictPolicy adds the shipped strict policy to the administrators' bundles unless one of them
	// provides its root: check, which reports its findings.
	StrictPolicy bool
	// Others says what the command does with documents of kinds sidecarctl does not read.
	Others string
}

// Workspace is everything read from the input: objects by kind, the policy snapshot, and every
// problem found on the way.
type Workspace struct {
	Objects []*manifest.Object
	// SidecarSets are those a cluster would have admitted, in input order; the snapshot holds
	// exactly these. Decoded are those that decoded, defaulted and hashed, the refused included.
	SidecarSets []*v1beta1.SidecarSet
	Decoded     []*v1beta1.SidecarSet
	Origin      map[*v1beta1.SidecarSet]*manifest.Object
	// Written is each SidecarSet as written (a v1alpha1 one names its errors by its own fields).
	Written    map[*v1beta1.SidecarSet]versions.Written
	Namespaces []*corev1.Namespace
	Revisions  []*appsv1.ControllerRevision
	Workloads  []*manifest.Object
	// StrictRules are the rules of the strict policy in force (StrictPolicy), without their prefix.
	StrictRules []string
	// Compiler prepared Snapshot; its Bundle is what `sidecarctl compile` writes.
	Compiler *engine.Compiler
	Snapshot *engine.Snapshot
	// Problems are the documents that did not decode, the SidecarSets a cluster would have refused
	// and what a command could not do for one object, one line each, in the unified format
	// FILE: document N (Kind/Name): field: reason. Any of them makes the command exit 1.
	Problems manifest.Errors
	// SidecarSetsGiven counts the SidecarSets of the input, those that did not decode included;
	// Refused names those refused after decoding.
	SidecarSetsGiven int
	Refused          map[string]bool
	// Input is what reading found, the rejected documents included; Warnings every warning, with
	// its rule, for check.
	Input        manifest.Input
	Warnings     []findings.Finding
	stderr       io.Writer
	keepWarnings bool
	// anchors place what was read from standard input in the files it came from, when it says.
	anchors *stdinAnchors
}

// Load reads the manifests and bundles, defaults and hashes SidecarSets as the API server and the
// defaulting webhook would, prepares the policies and validates the SidecarSets (check): no
// command acts on a SidecarSet a cluster would have refused. A document that does not decode and a
// refused SidecarSet are problems of the workspace, and the command goes on with the rest; the
// error is what stops it (no input at all, a bundle that cannot be read, the engine failing).
//
// Warnings go to Stderr at once unless kept: input read other than as written, and documents of
// kinds sidecarctl does not read, which the command treats as Others says.
func Load(ctx context.Context, opts Options) (*Workspace, error) {
	w, err := Read(opts)
	if err != nil {
		return nil, err
	}
	undecoded := map[string]bool{}
	for _, e := range w.Problems {
		if e.Kind == "SidecarSet" {
			undecoded[e.String()] = true
		}
	}
	w.SidecarSetsGiven = len(undecoded)
	var candidates []*v1beta1.SidecarSet
	var configMaps []*manifest.Object
	seen := map[string]*manifest.Object{}
	notRead := map[string]int{}
	for _, o := range w.Objects {
		switch obj := o.Obj.(type) {
		case *v1alpha1.SidecarSet, *v1beta1.SidecarSet:
			w.SidecarSetsGiven++
			written, err := versions.Of(obj)
			if err != nil {
				w.Refuse(o.Report("", err.Error()))
				continue
			}
			ss := written.Hub
			if ss.Namespace != "" {
				w.Warn(findings.RuleInput, o.Report("metadata.namespace", "ignored: a SidecarSet is cluster-scoped, and the API server clears the namespace before any webhook sees it"))
				ss.Namespace = ""
			}
			if first, dup := seen[ss.Name]; dup {
				w.Refuse(o.Report("metadata.name", fmt.Sprintf("SidecarSet %q is also defined at %s", ss.Name, first)))
				continue
			}
			seen[ss.Name] = o
			if err := defaults.SidecarSetAndHash(ss); err != nil {
				w.Refuse(o.Report("", err.Error()))
				continue
			}
			candidates = append(candidates, ss)
			w.Origin[ss], w.Written[ss] = o, written
		case *corev1.Namespace:
			w.Namespaces = append(w.Namespaces, obj)
		case *appsv1.ControllerRevision:
			w.Revisions = append(w.Revisions, obj)
		case *corev1.ConfigMap:
			if obj.Name == v1beta1.KruiseConfigurationName {
				configMaps = append(configMaps, o)
			}
		default:
			switch {
			case manifest.IsWorkload(o.Obj):
				w.Workloads = append(w.Workloads, o)
			case manifest.IsPassThrough(o.Obj):
				gvk := o.Obj.GetObjectKind().GroupVersionKind()
				notRead[gvk.GroupVersion().String()+" "+gvk.Kind]++
			}
		}
	}
	if len(notRead) > 0 {
		w.Warn(findings.RuleKindNotRead, notReadWarning(notRead, opts.Others))
	}
	for _, extra := range configMaps[min(1, len(configMaps)):] {
		w.Problems = append(w.Problems, extra.Report("", fmt.Sprintf("ConfigMap %s is given more than once: %s is used", v1beta1.KruiseConfigurationName, configMaps[0])))
	}
	admin, err := opts.adminBundleList()
	if err != nil {
		return nil, err
	}
	if opts.StrictPolicy {
		var owner int
		if admin, w.StrictRules, owner, err = withStrictPolicy(admin); err != nil {
			return nil, err
		}
		// A bundle whose roots cover the strict policy's replaces it, though it may hold none.
		if owner >= 0 && len(w.StrictRules) == 0 && owner < len(opts.AdminBundles) {
			w.Warn(findings.RuleInput, &manifest.Error{Position: manifest.Position{Source: opts.AdminBundles[owner]},
				Reason: "its roots cover " + strict.Root + " but it holds no strict policy there: the built-in strict findings are off (give each of its SidecarSet policies a root of its own, sidecarsets/NAME, to keep them)"})
		}
	}
	var configMap *manifest.Object
	if len(configMaps) > 0 {
		configMap = configMaps[0]
	}
	build := func(sets []*v1beta1.SidecarSet) (*engine.Snapshot, *engine.Compiler, error) {
		c := new(engine.Compiler)
		snap, err := injector.Snapshot(ctx, injector.Policies{
			State:     bundles.State{SidecarSets: sets, Namespaces: w.Namespaces, ControllerRevisions: w.Revisions},
			Admin:     admin,
			Whitelist: func() (*bundle.Bundle, error) { return whitelist(configMap, opts.DefaultsAllowed) },
			Compiler:  c,
		})
		return snap, c, err
	}
	w.Decoded = candidates
	if err := w.admit(ctx, candidates, build); err != nil {
		return nil, err
	}
	return w, nil
}

// Read is the start of Load without its judging: the documents of the files in input order, what
// the reader warns about recorded, what does not decode kept as problems. Input without a single
// document is an error.
func Read(opts Options) (*Workspace, error) {
	stdin := opts.Stdin
	var anchors *stdinAnchors
	if slices.Contains(opts.Files, manifest.Stdin) {
		// Read here to find helm's Source comments; past the bound, the reader says what is too large.
		data, err := io.ReadAll(io.LimitReader(stdin, opts.Reader.MaxInputBytes+1))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", manifest.StdinSource, err)
		}
		stdin, anchors = bytes.NewReader(data), newStdinAnchors(data, opts.StdinName)
	}
	in := opts.Reader.ReadInput(stdin, opts.Files...)
	w := &Workspace{Objects: in.Objects, Origin: map[*v1beta1.SidecarSet]*manifest.Object{}, Written: map[*v1beta1.SidecarSet]versions.Written{}, Refused: map[string]bool{},
		Problems: in.Errors, stderr: opts.Stderr, Input: in, keepWarnings: opts.KeepWarnings, anchors: anchors}
	for _, e := range in.Warnings {
		w.Warn(findings.RuleInput, e)
	}
	if len(in.Objects) == 0 && len(in.Errors) == 0 {
		// Nothing is left to report them: what was skipped says why nothing was found.
		for _, f := range w.Warnings {
			if w.keepWarnings {
				fmt.Fprintln(w.stderr, "warning: "+w.anchors.anchor(f.Error).Error())
			}
		}
		sources := slices.Clone(opts.Files)
		for i, s := range sources {
			if s == manifest.Stdin {
				sources[i] = manifest.StdinSource
			}
		}
		return nil, fmt.Errorf("no documents found in %s", strings.Join(sources, ", "))
	}
	return w, nil
}

// admit validates the SidecarSets as the validating webhook would when they are created in input
// order, as `kubectl apply -f` creates them: each beside the ones admitted before it. It keeps the
// admitted ones and their snapshot.
//
// Each is first validated beside every other SidecarSet given, with one compile. Only one refused
// there is validated again beside those admitted before it, which takes a compile of its own: of
// two that collide, the first is then admitted and the second refused, naming the first.
func (w *Workspace) admit(ctx context.Context, candidates []*v1beta1.SidecarSet, build func([]*v1beta1.SidecarSet) (*engine.Snapshot, *engine.Compiler, error)) error {
	all, allCore, err := build(candidates)
	if err != nil {
		return err
	}
	var (
		admitted     []*v1beta1.SidecarSet
		earlier      *engine.Snapshot
		earlierCore  *engine.Compiler
		earlierHolds = -1 // how many of admitted earlier holds
	)
	for _, ss := range candidates {
		errs, err := ValidateSidecarSet(ctx, all, ss)
		if err != nil {
			return err
		}
		if len(errs) > 0 {
			if earlierHolds != len(admitted) {
				if earlier, earlierCore, err = build(admitted); err != nil {
					return err
				}
				earlierHolds = len(admitted)
			}
			if errs, err = ValidateSidecarSet(ctx, earlier, ss); err != nil {
				return err
			}
		}
		if len(errs) == 0 {
			admitted = append(admitted, ss)
			continue
		}
		for _, e := range w.Written[ss].Errors(errs) {
			w.Refuse(w.Origin[ss].Report(e.Field, e.ErrorBody()))
		}
	}
	w.SidecarSets = admitted
	switch len(admitted) {
	case len(candidates):
		w.Snapshot, w.Compiler = all, allCore
	case earlierHolds:
		w.Snapshot, w.Compiler = earlier, earlierCore
	default:
		w.Snapshot, w.Compiler, err = build(admitted)
	}
	return err
}

// ValidateSidecarSet validates ss as the validating webhook would, and when the single-object rules
// refuse it (then the webhook evaluates no policy), adds what the whitelist says of it: OpenKruise
// checks the whitelist among those rules, and a CI run that told of a refused key only once the
// rest is fixed would take two rounds. Conflicts stay unsaid, as OpenKruise's webhook leaves them:
// they are about a SidecarSet that cannot exist as written. The webhook's answer does not say which
// step refused, so a whitelist error it holds already (the policies ran) is not added again.
func ValidateSidecarSet(ctx context.Context, snap *engine.Snapshot, ss *v1beta1.SidecarSet) (field.ErrorList, error) {
	errs, err := injector.ValidateSidecarSet(ctx, snap, ss, nil)
	if err != nil || len(errs) == 0 {
		return errs, err
	}
	denied, err := snap.Whitelist(ctx, ss)
	if err != nil {
		return nil, err
	}
	said := map[string]bool{}
	for _, e := range errs {
		said[e.Error()] = true
	}
	for _, v := range denied {
		if e := v.FieldError(); !said[e.Error()] {
			errs = append(errs, e)
		}
	}
	return errs, nil
}

// Refuse records a problem that keeps a SidecarSet out.
func (w *Workspace) Refuse(e *manifest.Error) {
	w.Problems = append(w.Problems, e)
	w.Refused[e.Name] = true
}

// Fail records what a command could not do for o.
func (w *Workspace) Fail(o *manifest.Object, err error) {
	w.Problems = append(w.Problems, o.Report("", err.Error()))
}

// Warn records a warning of rule, and prints it unless the command reports it (KeepWarnings).
func (w *Workspace) Warn(rule string, e *manifest.Error) {
	w.Warnings = append(w.Warnings, findings.Finding{Error: e, Severity: findings.SeverityWarning, Rule: rule})
	if !w.keepWarnings {
		fmt.Fprintln(w.stderr, "warning: "+w.anchors.anchor(e).Error())
	}
}

// notReadWarning is one warning for every document of a kind sidecarctl does not read, with the
// count of each kind, rather than one per document: helm's output holds dozens, and GitHub shows only
// so many annotations of a run. others says what the command does with them.
func notReadWarning(counts map[string]int, others string) *manifest.Error {
	total := 0
	var kinds []string
	for _, kind := range slices.Sorted(maps.Keys(counts)) {
		total += counts[kind]
		kinds = append(kinds, fmt.Sprintf("%s (%d)", kind, counts[kind]))
	}
	return &manifest.Error{Position: manifest.Position{Item: -1},
		Reason: fmt.Sprintf("%d document(s) of kinds sidecarctl does not read, %s: %s", total, others, strings.Join(kinds, ", "))}
}

// Err is every problem, one per line, or nil.
func (w *Workspace) Err() error {
	if len(w.Problems) == 0 {
		return nil
	}
	out := make(manifest.Errors, len(w.Problems))
	for i, e := range w.Problems {
		out[i] = w.anchors.anchor(e)
	}
	return out
}

// Anchor is e placed where standard input's content came from, when standard input says.
func (w *Workspace) Anchor(e *manifest.Error) *manifest.Error {
	return w.anchors.anchor(e)
}

// Name is o as messages name it (manifest.Object's String), placed as Anchor places it.
func (w *Workspace) Name(o *manifest.Object) string {
	e := w.anchors.anchor(o.Report("", ""))
	e.Line = 0
	return e.Error()
}

// whitelist is OpenKruise's kruise-configuration ConfigMap cm (nil when none is given) as the
// whitelist data bundle, for when no administrators' bundle provides one.
func whitelist(cm *manifest.Object, defaultsAllowed bool) (*bundle.Bundle, error) {
	var data *corev1.ConfigMap
	if cm != nil {
		data = cm.Obj.(*corev1.ConfigMap)
	}
	wl, err := manifest.Whitelist(data, defaultsAllowed)
	if err != nil {
		// Whitelist cannot know where the ConfigMap was read.
		var es manifest.Errors
		if errors.As(err, &es) {
			for _, e := range es {
				e.Position = cm.Position
			}
		}
		return nil, err
	}
	return bundles.DataBundle(bundles.WhitelistRoot, "configmap", wl), nil
}

// withStrictPolicy adds the shipped strict policy to admin unless a bundle of admin provides its
// root, an administrator's copy, which replaces it; and names the rules of the one in force, and
// the index in admin of the bundle that replaced it (-1: none did).
func withStrictPolicy(admin []*bundle.Bundle) ([]*bundle.Bundle, []string, int, error) {
	for i, b := range admin {
		if bundles.OwnsRoot(b, strict.Root) {
			return admin, strict.Rules(b), i, nil
		}
	}
	b, err := strict.Bundle()
	if err != nil {
		return nil, nil, -1, err
	}
	return append(admin, b), strict.Rules(b), -1, nil
}

func (opts Options) adminBundleList() ([]*bundle.Bundle, error) {
	var v *bundles.Verification
	if len(opts.VerificationKeys) > 0 {
		var err error
		if v, err = bundles.LoadVerificationKeys(opts.VerificationKeys, opts.VerificationAlg, opts.VerificationScope); err != nil {
			return nil, err
		}
	}
	var out []*bundle.Bundle
	var problems []string
	for _, p := range opts.AdminBundles {
		b, err := bundles.Read(p, v)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		out = append(out, b)
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	return out, nil
}
