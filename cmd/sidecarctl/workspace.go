package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarset/defaults"
)

// sourceFlags are the inputs every subcommand that reads manifests shares.
type sourceFlags struct {
	files            []string
	adminBundles     []string
	verificationKeys []string
	verificationAlg  string
	verificationScp  string
	defaultsAllowed  bool
	namespace        string
}

func (f *sourceFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVarP(&f.files, "filename", "f", nil, "manifest file, directory (recursive *.yaml, *.yml, *.json) or - for stdin; repeatable")
	fs.StringArrayVar(&f.adminBundles, "bundle", nil, "administrators' bundle (directory or .tar.gz) with roots whitelist and/or gates; repeatable")
	fs.StringArrayVar(&f.verificationKeys, "verification-key", nil, "PEM public key that --bundle signatures must verify against (key id: file name without extension); repeatable. When given, unsigned bundles are refused")
	fs.StringVar(&f.verificationAlg, "verification-alg", "RS256", "signature algorithm of the verification keys")
	fs.StringVar(&f.verificationScp, "verification-scope", "", "required scope claim of bundle signatures")
	fs.BoolVar(&f.defaultsAllowed, "patch-metadata-defaults-allowed", false, "feature gate SidecarSetPatchPodMetadataDefaultsAllowed: allow patchPodMetadata when no whitelist applies (ignored when a --bundle provides the whitelist)")
	fs.StringVarP(&f.namespace, "namespace", "n", "default", "namespace of workloads that name none")
}

// workspace is everything read from the command line: objects by kind, and the policy snapshot.
type workspace struct {
	objects     []*manifest.Object
	sidecarSets []*v1beta1.SidecarSet
	origin      map[*v1beta1.SidecarSet]*manifest.Object
	namespaces  []*corev1.Namespace
	revisions   []*appsv1.ControllerRevision
	workloads   []*manifest.Object
	core        *bundle.Bundle
	snapshot    *engine.Snapshot
}

// load reads the manifests and bundles, defaults and hashes SidecarSets as the API server and the
// defaulting webhook would, prepares the policies and validates the SidecarSets (check): no
// command acts on a SidecarSet a cluster would have refused. Errors are returned all at once, one per line.
func (f *sourceFlags) load(ctx context.Context, stdin io.Reader) (*workspace, error) {
	if len(f.files) == 0 {
		return nil, errors.New("no input: give at least one -f PATH")
	}
	objs, err := manifest.Read(stdin, f.files...)
	if err != nil {
		return nil, err
	}
	w := &workspace{objects: objs, origin: map[*v1beta1.SidecarSet]*manifest.Object{}}
	var problems []string
	var configMaps []*manifest.Object
	for _, o := range objs {
		switch obj := o.Obj.(type) {
		case *v1beta1.SidecarSet:
			if err := defaults.SidecarSetAndHash(obj); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", o, err))
				continue
			}
			w.sidecarSets = append(w.sidecarSets, obj)
			w.origin[obj] = o
		case *corev1.Namespace:
			w.namespaces = append(w.namespaces, obj)
		case *appsv1.ControllerRevision:
			w.revisions = append(w.revisions, obj)
		case *corev1.ConfigMap:
			if obj.Name == v1beta1.KruiseConfigurationName {
				configMaps = append(configMaps, o)
			}
		default:
			if manifest.IsWorkload(o.Obj) {
				w.workloads = append(w.workloads, o)
			}
		}
	}
	seen := map[string]*manifest.Object{}
	for _, ss := range w.sidecarSets {
		if first, dup := seen[ss.Name]; dup {
			problems = append(problems, fmt.Sprintf("%s: metadata.name: SidecarSet %q is also defined at %s", w.origin[ss], ss.Name, first))
		}
		seen[ss.Name] = w.origin[ss]
	}
	if len(configMaps) > 1 {
		problems = append(problems, fmt.Sprintf("%s: ConfigMap %s is given more than once (also %s)", configMaps[1], v1beta1.KruiseConfigurationName, configMaps[0]))
	}
	admin, err := f.adminBundleList()
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	w.snapshot, w.core, err = injector.Snapshot(ctx, injector.Policies{
		State: bundles.State{SidecarSets: w.sidecarSets, Namespaces: w.namespaces, ControllerRevisions: w.revisions},
		Admin: admin,
		Whitelist: func() (*bundle.Bundle, error) {
			var cm *corev1.ConfigMap
			source := "--patch-metadata-defaults-allowed"
			if len(configMaps) == 1 {
				cm, source = configMaps[0].Obj.(*corev1.ConfigMap), configMaps[0].String()
			}
			wl, err := manifest.Whitelist(cm, f.defaultsAllowed)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", source, err)
			}
			return bundles.DataBundle(bundles.WhitelistRoot, "configmap", wl), nil
		},
	})
	if err != nil {
		return nil, err
	}
	if err := w.check(ctx); err != nil {
		return nil, err
	}
	return w, nil
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
