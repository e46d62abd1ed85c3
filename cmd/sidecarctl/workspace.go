package main

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
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarset/defaults"
	"github.com/sidecarops/sidecarops/internal/sidecarset/versions"
	"github.com/sidecarops/sidecarops/policies/strict"
)

// maxDocumentBytesFlag bounds what one document of -f may cost to decode, maxInputBytesFlag what
// all of them may.
const (
	maxDocumentBytesFlag = "max-document-bytes"
	maxInputBytesFlag    = "max-input-bytes"
)

// sourceFlags are the inputs every subcommand that reads manifests shares.
type sourceFlags struct {
	files            []string
	maxDocumentBytes int64
	maxInputBytes    int64
	adminBundles     []string
	verificationKeys []string
	verificationAlg  string
	verificationScp  string
	defaultsAllowed  bool
	namespace        string
	stdinName        string
	// keepWarnings keeps warnings for the command to report rather than printing them as they are
	// found: check, which prints each with its rule, or not at all when the rule is silenced.
	keepWarnings bool
	// strictPolicy adds the shipped strict policy to the administrators' bundles unless one of them
	// provides its root: check, which reports its findings.
	strictPolicy bool
}

func (f *sourceFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVarP(&f.files, "filename", "f", nil, "manifest file, directory (recursive *.yaml, *.yml, *.json; kustomization files skipped) or - for stdin; repeatable")
	fs.Int64Var(&f.maxDocumentBytes, maxDocumentBytesFlag, manifest.DefaultMaxDocumentBytes, "largest size of one document of -f, as written and as JSON with its YAML aliases and escapes expanded; a larger one is reported and skipped")
	fs.Int64Var(&f.maxInputBytes, maxInputBytesFlag, manifest.DefaultMaxInputBytes, "largest size of all documents of -f together, each counted as for --"+maxDocumentBytesFlag+"; the document that goes over is reported and nothing after it is read")
	fs.StringArrayVar(&f.adminBundles, "bundle", nil, "administrators' bundle (directory or .tar.gz) with roots whitelist, gates and/or under sidecarsets (SidecarSet policies, which check evaluates); repeatable")
	fs.StringArrayVar(&f.verificationKeys, "verification-key", nil, "PEM public key that --bundle signatures must verify against (key id: file name without extension); repeatable. When given, unsigned bundles are refused")
	fs.StringVar(&f.verificationAlg, "verification-alg", "RS256", "signature algorithm of the verification keys")
	fs.StringVar(&f.verificationScp, "verification-scope", "", "required scope claim of bundle signatures")
	fs.BoolVar(&f.defaultsAllowed, "patch-metadata-defaults-allowed", false, "feature gate SidecarSetPatchPodMetadataDefaultsAllowed: allow patchPodMetadata when no whitelist applies (ignored when a --bundle provides the whitelist)")
	fs.StringVarP(&f.namespace, "namespace", "n", "default", "namespace of workloads that name none")
	fs.StringVar(&f.stdinName, stdinFilenameFlag, "", "with -f -, the file that standard input's documents are reported in; a document under helm's \"# Source: FILE\" comment is reported in FILE")
}

// stdinFilenameFlag names standard input in what is reported.
const stdinFilenameFlag = "stdin-filename"

// workspace is everything read from the command line: objects by kind, the policy snapshot, and
// every problem found on the way.
type workspace struct {
	objects []*manifest.Object
	// sidecarSets are those a cluster would have admitted, in input order; the snapshot holds
	// exactly these. decoded are those that decoded, defaulted and hashed, the refused included.
	sidecarSets []*v1beta1.SidecarSet
	decoded     []*v1beta1.SidecarSet
	origin      map[*v1beta1.SidecarSet]*manifest.Object
	// written is each SidecarSet as written (a v1alpha1 one names its errors by its own fields).
	written    map[*v1beta1.SidecarSet]versions.Written
	namespaces []*corev1.Namespace
	revisions  []*appsv1.ControllerRevision
	workloads  []*manifest.Object
	// strictRules are the rules of the strict policy in force (strictPolicy), without their prefix.
	strictRules []string
	// compiler prepared snapshot; its Bundle is what `sidecarctl compile` writes.
	compiler *engine.Compiler
	snapshot *engine.Snapshot
	// problems are the documents that did not decode, the SidecarSets a cluster would have refused
	// and what a command could not do for one object, one line each, in the unified format
	// FILE: document N (Kind/Name): field: reason. Any of them makes the command exit 1.
	problems manifest.Errors
	// sidecarSetsGiven counts the SidecarSets of the input, those that did not decode included;
	// refused names those refused after decoding.
	sidecarSetsGiven int
	refused          map[string]bool
	stderr           io.Writer
	// input is what reading found, the rejected documents included; warnings every warning, with
	// its rule, for check.
	input        manifest.Input
	warnings     []finding
	keepWarnings bool
	// anchors place what was read from standard input in the files it came from, when it says.
	anchors *stdinAnchors
}

// load reads the manifests and bundles, defaults and hashes SidecarSets as the API server and the
// defaulting webhook would, prepares the policies and validates the SidecarSets (check): no
// command acts on a SidecarSet a cluster would have refused. A document that does not decode and a
// refused SidecarSet are problems of the workspace, and the command goes on with the rest; the
// error is what stops it (no input at all, a bundle that cannot be read, the engine failing).
//
// Warnings go to stderr at once: input read other than as written, and documents of kinds
// sidecarctl does not read, which the command treats as others says ("passed through unchanged").
func (f *sourceFlags) load(cmd *cobra.Command, others string) (*workspace, error) {
	w, err := f.read(cmd)
	if err != nil {
		return nil, err
	}
	undecoded := map[string]bool{}
	for _, e := range w.problems {
		if e.Kind == "SidecarSet" {
			undecoded[e.String()] = true
		}
	}
	w.sidecarSetsGiven = len(undecoded)
	var candidates []*v1beta1.SidecarSet
	var configMaps []*manifest.Object
	seen := map[string]*manifest.Object{}
	notRead := map[string]int{}
	for _, o := range w.objects {
		switch obj := o.Obj.(type) {
		case *v1alpha1.SidecarSet, *v1beta1.SidecarSet:
			w.sidecarSetsGiven++
			written, err := versions.Of(obj)
			if err != nil {
				w.refuse(o.Report("", err.Error()))
				continue
			}
			ss := written.Hub
			if ss.Namespace != "" {
				w.warn(ruleInput, o.Report("metadata.namespace", "ignored: a SidecarSet is cluster-scoped, and the API server clears the namespace before any webhook sees it"))
				ss.Namespace = ""
			}
			if first, dup := seen[ss.Name]; dup {
				w.refuse(o.Report("metadata.name", fmt.Sprintf("SidecarSet %q is also defined at %s", ss.Name, first)))
				continue
			}
			seen[ss.Name] = o
			if err := defaults.SidecarSetAndHash(ss); err != nil {
				w.refuse(o.Report("", err.Error()))
				continue
			}
			candidates = append(candidates, ss)
			w.origin[ss], w.written[ss] = o, written
		case *corev1.Namespace:
			w.namespaces = append(w.namespaces, obj)
		case *appsv1.ControllerRevision:
			w.revisions = append(w.revisions, obj)
		case *corev1.ConfigMap:
			if obj.Name == v1beta1.KruiseConfigurationName {
				configMaps = append(configMaps, o)
			}
		default:
			switch {
			case manifest.IsWorkload(o.Obj):
				w.workloads = append(w.workloads, o)
			case manifest.IsPassThrough(o.Obj):
				gvk := o.Obj.GetObjectKind().GroupVersionKind()
				notRead[gvk.GroupVersion().String()+" "+gvk.Kind]++
			}
		}
	}
	if len(notRead) > 0 {
		w.warn(ruleKindNotRead, notReadWarning(notRead, others))
	}
	for _, extra := range configMaps[min(1, len(configMaps)):] {
		w.problems = append(w.problems, extra.Report("", fmt.Sprintf("ConfigMap %s is given more than once: %s is used", v1beta1.KruiseConfigurationName, configMaps[0])))
	}
	admin, err := f.adminBundleList()
	if err != nil {
		return nil, err
	}
	if f.strictPolicy {
		var owner int
		if admin, w.strictRules, owner, err = withStrictPolicy(admin); err != nil {
			return nil, err
		}
		// A bundle whose roots cover the strict policy's replaces it, though it may hold none.
		if owner >= 0 && len(w.strictRules) == 0 && owner < len(f.adminBundles) {
			w.warn(ruleInput, &manifest.Error{Position: manifest.Position{Source: f.adminBundles[owner]},
				Reason: "its roots cover " + strict.Root + " but it holds no strict policy there: the built-in strict findings are off (give each of its SidecarSet policies a root of its own, sidecarsets/NAME, to keep them)"})
		}
	}
	var configMap *manifest.Object
	if len(configMaps) > 0 {
		configMap = configMaps[0]
	}
	build := func(sets []*v1beta1.SidecarSet) (*engine.Snapshot, *engine.Compiler, error) {
		c := new(engine.Compiler)
		snap, err := injector.Snapshot(cmd.Context(), injector.Policies{
			State:     bundles.State{SidecarSets: sets, Namespaces: w.namespaces, ControllerRevisions: w.revisions},
			Admin:     admin,
			Whitelist: func() (*bundle.Bundle, error) { return f.whitelist(configMap) },
			Compiler:  c,
		})
		return snap, c, err
	}
	w.decoded = candidates
	if err := w.admit(cmd.Context(), candidates, build); err != nil {
		return nil, err
	}
	return w, nil
}

// read is the start of load without its judging: the documents of -f in input order, what the
// reader warns about printed, what does not decode kept as problems. No -f, and input without a
// single document, are errors.
func (f *sourceFlags) read(cmd *cobra.Command) (*workspace, error) {
	if len(f.files) == 0 {
		return nil, usageError{errors.New("no input: give at least one -f PATH")}
	}
	for _, limit := range []struct {
		flag  string
		value int64
	}{{maxDocumentBytesFlag, f.maxDocumentBytes}, {maxInputBytesFlag, f.maxInputBytes}} {
		if limit.value <= 0 {
			return nil, usageError{fmt.Errorf("--%s %d: must be positive", limit.flag, limit.value)}
		}
	}
	stdin := cmd.InOrStdin()
	var anchors *stdinAnchors
	switch {
	case slices.Contains(f.files, manifest.Stdin):
		// Read here to find helm's Source comments; past the bound, the reader says what is too large.
		data, err := io.ReadAll(io.LimitReader(stdin, f.maxInputBytes+1))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", manifest.StdinSource, err)
		}
		stdin, anchors = bytes.NewReader(data), newStdinAnchors(data, f.stdinName)
	case f.stdinName != "":
		return nil, usageError{fmt.Errorf("--%s %s: standard input is not read (no -f -)", stdinFilenameFlag, f.stdinName)}
	}
	in := manifest.Reader{
		MaxDocumentBytes: f.maxDocumentBytes, DocumentLimitName: "--" + maxDocumentBytesFlag,
		MaxInputBytes: f.maxInputBytes, InputLimitName: "--" + maxInputBytesFlag,
	}.ReadInput(stdin, f.files...)
	w := &workspace{objects: in.Objects, origin: map[*v1beta1.SidecarSet]*manifest.Object{}, written: map[*v1beta1.SidecarSet]versions.Written{}, refused: map[string]bool{},
		problems: in.Errors, stderr: cmd.ErrOrStderr(), input: in, keepWarnings: f.keepWarnings, anchors: anchors}
	for _, e := range in.Warnings {
		w.warn(ruleInput, e)
	}
	if len(in.Objects) == 0 && len(in.Errors) == 0 {
		// Nothing is left to report them: what was skipped says why nothing was found.
		for _, f := range w.warnings {
			if w.keepWarnings {
				fmt.Fprintln(w.stderr, "warning: "+w.anchors.anchor(f.Error).Error())
			}
		}
		sources := slices.Clone(f.files)
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
func (w *workspace) admit(ctx context.Context, candidates []*v1beta1.SidecarSet, build func([]*v1beta1.SidecarSet) (*engine.Snapshot, *engine.Compiler, error)) error {
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
		errs, err := validateSidecarSet(ctx, all, ss)
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
			if errs, err = validateSidecarSet(ctx, earlier, ss); err != nil {
				return err
			}
		}
		if len(errs) == 0 {
			admitted = append(admitted, ss)
			continue
		}
		for _, e := range w.written[ss].Errors(errs) {
			w.refuse(w.origin[ss].Report(e.Field, e.ErrorBody()))
		}
	}
	w.sidecarSets = admitted
	switch len(admitted) {
	case len(candidates):
		w.snapshot, w.compiler = all, allCore
	case earlierHolds:
		w.snapshot, w.compiler = earlier, earlierCore
	default:
		w.snapshot, w.compiler, err = build(admitted)
	}
	return err
}

// validateSidecarSet validates ss as the validating webhook would, and when the single-object rules
// refuse it (then the webhook evaluates no policy), adds what the whitelist says of it: OpenKruise
// checks the whitelist among those rules, and a CI run that told of a refused key only once the
// rest is fixed would take two rounds. Conflicts stay unsaid, as OpenKruise's webhook leaves them:
// they are about a SidecarSet that cannot exist as written. The webhook's answer does not say which
// step refused, so a whitelist error it holds already (the policies ran) is not added again.
func validateSidecarSet(ctx context.Context, snap *engine.Snapshot, ss *v1beta1.SidecarSet) (field.ErrorList, error) {
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

// refuse records a problem that keeps a SidecarSet out.
func (w *workspace) refuse(e *manifest.Error) {
	w.problems = append(w.problems, e)
	w.refused[e.Name] = true
}

// fail records what a command could not do for o.
func (w *workspace) fail(o *manifest.Object, err error) {
	w.problems = append(w.problems, o.Report("", err.Error()))
}

// warn records a warning of rule, and prints it unless the command reports it (keepWarnings).
func (w *workspace) warn(rule string, e *manifest.Error) {
	w.warnings = append(w.warnings, finding{Error: e, severity: severityWarning, rule: rule})
	if !w.keepWarnings {
		fmt.Fprintln(w.stderr, "warning: "+w.anchors.anchor(e).Error())
	}
}

// warnNotSeen records what the installed pod webhook never sees.
func (w *workspace) warnNotSeen(e *manifest.Error) {
	w.warn(ruleWebhook, e)
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

// err is every problem, one per line, or nil.
func (w *workspace) err() error {
	if len(w.problems) == 0 {
		return nil
	}
	out := make(manifest.Errors, len(w.problems))
	for i, e := range w.problems {
		out[i] = w.anchors.anchor(e)
	}
	return out
}

// name is o as messages name it (manifest.Object's String), placed as anchor places it.
func (w *workspace) name(o *manifest.Object) string {
	e := w.anchors.anchor(o.Report("", ""))
	e.Line = 0
	return e.Error()
}

// whitelist is OpenKruise's kruise-configuration ConfigMap cm (nil when none is given) as the
// whitelist data bundle, for when no administrators' bundle provides one.
func (f *sourceFlags) whitelist(cm *manifest.Object) (*bundle.Bundle, error) {
	var data *corev1.ConfigMap
	if cm != nil {
		data = cm.Obj.(*corev1.ConfigMap)
	}
	wl, err := manifest.Whitelist(data, f.defaultsAllowed)
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

func (f *sourceFlags) adminBundleList() ([]*bundle.Bundle, error) {
	var v *bundles.Verification
	if len(f.verificationKeys) > 0 {
		var err error
		if v, err = bundles.LoadVerificationKeys(f.verificationKeys, f.verificationAlg, f.verificationScp); err != nil {
			return nil, err
		}
	}
	var out []*bundle.Bundle
	var problems []string
	for _, p := range f.adminBundles {
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
