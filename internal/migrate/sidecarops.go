package migrate

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/open-policy-agent/opa/v1/bundle"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
)

// installed is sidecarops' manager as its Deployment runs it; where there is none yet, as the chart
// installs it by default.
type installed struct {
	// found says whether its Deployment is there; line says what it is, for the report.
	found bool
	line  string
	// openKruiseKept is --openkruise-kept.
	openKruiseKept bool
	// configurationNamespace is where it reads kruise-configuration: --configuration-namespace,
	// else its own namespace.
	configurationNamespace string
	// defaultsAllowed is --patch-metadata-defaults-allowed.
	defaultsAllowed bool
}

// readSidecarops reads sidecarops' manager Deployment, for the flags that change what this check
// expects of it.
func (k *checker) readSidecarops(ctx context.Context) error {
	o := k.o
	k.sidecarops = installed{configurationNamespace: o.Namespace,
		line: fmt.Sprintf("sidecarops' manager: no Deployment %s/%s yet: taken as the chart installs it by default", o.Namespace, Manager)}
	var d appsv1.Deployment
	err := k.c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: Manager}, &d)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading Deployment %s/%s: %w", o.Namespace, Manager, err)
	}
	cs := d.Spec.Template.Spec.Containers
	i := max(0, slices.IndexFunc(cs, func(c corev1.Container) bool { return c.Name == "manager" }))
	if len(cs) == 0 {
		return fmt.Errorf("reading Deployment %s/%s: it has no container", o.Namespace, Manager)
	}
	args := append(slices.Clone(cs[i].Command), cs[i].Args...)
	k.sidecarops = installed{
		found:                  true,
		openKruiseKept:         boolFlag(args, "openkruise-kept"),
		configurationNamespace: cmp.Or(stringFlag(args, "configuration-namespace"), stringFlag(args, "namespace"), o.Namespace),
		defaultsAllowed:        boolFlag(args, "patch-metadata-defaults-allowed"),
	}
	k.sidecarops.line = fmt.Sprintf("sidecarops' manager: Deployment %s/%s", o.Namespace, Manager)
	if k.sidecarops.openKruiseKept {
		k.sidecarops.line += ", with --openkruise-kept"
	}
	return nil
}

// flag finds the last of a Go flag's forms in args (-name, --name, -name=value, --name=value, and
// -name value for a flag that takes one): whether it is there, its value after "=", and the argument
// after it.
func flag(args []string, name string) (set bool, value, next string) {
	for i, a := range args {
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if len(a) == len(args[i]) {
			continue // not a flag
		}
		switch {
		case a == name:
			set, value, next = true, "", ""
			if i+1 < len(args) {
				next = args[i+1]
			}
		case strings.HasPrefix(a, name+"="):
			set, value, next = true, strings.TrimPrefix(a, name+"="), ""
		}
	}
	return set, value, next
}

func boolFlag(args []string, name string) bool {
	set, value, _ := flag(args, name)
	if !set || value == "" {
		return set
	}
	b, err := strconv.ParseBool(value)
	return err == nil && b
}

func stringFlag(args []string, name string) string {
	_, value, next := flag(args, name)
	return cmp.Or(value, next)
}

// whitelistAt reads the whitelist of kruise-configuration in ns: its value, whether it is there,
// and the ConfigMap (nil where there is none).
func (k *checker) whitelistAt(ctx context.Context, ns string) (string, bool, *corev1.ConfigMap, error) {
	var cm corev1.ConfigMap
	err := k.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: v1beta1.KruiseConfigurationName}, &cm)
	if apierrors.IsNotFound(err) {
		return "", false, nil, nil
	}
	if err != nil {
		return "", false, nil, fmt.Errorf("reading ConfigMap %s/%s: %w", ns, v1beta1.KruiseConfigurationName, err)
	}
	v, ok := cm.Data[v1beta1.PatchPodMetadataWhiteListKey]
	return v, ok, &cm, nil
}

// checkWhitelist compares OpenKruise's patchPodMetadata whitelist (kruise-configuration in its own
// namespace) with the one sidecarops' manager reads: a SidecarSet that patches pod annotations is
// judged by it, and one left behind refuses what OpenKruise allowed.
func (k *checker) checkWhitelist(ctx context.Context) error {
	o, r := k.o, &k.r
	theirs, theirsOK, _, err := k.whitelistAt(ctx, o.KruiseNamespace)
	if err != nil {
		return err
	}
	readNS := k.sidecarops.configurationNamespace
	ours, oursOK, cm, err := k.whitelistAt(ctx, readNS)
	if err != nil {
		return err
	}
	at := func(ns string, ok bool) string {
		if !ok {
			return "none in " + ns
		}
		return "ConfigMap " + ns + "/" + v1beta1.KruiseConfigurationName
	}
	r.Found = append(r.Found, k.sidecarops.line, fmt.Sprintf("the patchPodMetadata whitelist: OpenKruise's %s; sidecarops' manager reads %s", at(o.KruiseNamespace, theirsOK), at(readNS, oursOK)))
	if theirsOK && (!oursOK || ours != theirs) {
		what := "none"
		if oursOK {
			what = "another whitelist"
		}
		r.Findings = append(r.Findings, Finding{
			Blocker: true,
			Message: fmt.Sprintf("OpenKruise's patchPodMetadata whitelist (ConfigMap %s/%s, key %s) is not the one sidecarops' manager reads (in %s: %s): SidecarSets that patch the annotations OpenKruise allows would be refused, or others admitted",
				o.KruiseNamespace, v1beta1.KruiseConfigurationName, v1beta1.PatchPodMetadataWhiteListKey, readNS, what),
			Fix: fmt.Sprintf("helm upgrade sidecarops CHART -n %s --reuse-values --set whitelistNamespace=%s   # the manager reads OpenKruise's (--configuration-namespace=%s); or copy it: ", o.Namespace, o.KruiseNamespace, o.KruiseNamespace) +
				fmt.Sprintf(`kubectl -n %s create configmap %s --from-literal=%s="$(kubectl -n %s get configmap %s -o jsonpath='{.data.%s}')" --dry-run=client -o yaml | kubectl apply -f -`,
					readNS, v1beta1.KruiseConfigurationName, v1beta1.PatchPodMetadataWhiteListKey, o.KruiseNamespace, v1beta1.KruiseConfigurationName, v1beta1.PatchPodMetadataWhiteListKey),
		})
	}
	k.whitelist, err = manifest.Whitelist(cm, k.sidecarops.defaultsAllowed)
	if err != nil {
		// The manager refuses it and keeps the whitelist it had: none, when it starts.
		r.Findings = append(r.Findings, Finding{
			Blocker: true,
			Message: fmt.Sprintf("the whitelist sidecarops' manager reads does not convert, so it is refused: %v", err),
			Fix:     fmt.Sprintf("kubectl -n %s edit configmap %s   # key %s, as OpenKruise reads it", readNS, v1beta1.KruiseConfigurationName, v1beta1.PatchPodMetadataWhiteListKey),
		})
		k.whitelist, _ = manifest.Whitelist(nil, k.sidecarops.defaultsAllowed)
	}
	k.whitelistCM = cm
	return nil
}

// checkVerdicts validates each SidecarSet as sidecarops' validating webhook would, against the
// ones created before it and with the whitelist the installed manager reads.
func (k *checker) checkVerdicts(ctx context.Context) error {
	items := k.sets
	slices.SortStableFunc(items, func(a, b v1beta1.SidecarSet) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	revs := make([]*appsv1.ControllerRevision, len(k.revisions))
	for i := range k.revisions {
		revs[i] = &k.revisions[i]
	}
	whitelist := func() (*bundle.Bundle, error) {
		return bundles.DataBundle(bundles.WhitelistRoot, "configmap", k.whitelist), nil
	}
	var earlier []*v1beta1.SidecarSet
	for i := range items {
		ss := items[i].DeepCopy()
		if err := defaults.SidecarSetAndHash(ss); err != nil {
			return fmt.Errorf("SidecarSet %s: %w", ss.Name, err)
		}
		snap, err := injector.Snapshot(ctx, injector.Policies{State: bundles.State{SidecarSets: earlier, ControllerRevisions: revs}, Whitelist: whitelist})
		if err != nil {
			return err
		}
		errs, err := injector.ValidateSidecarSet(ctx, snap, ss.DeepCopy(), nil)
		if err != nil {
			return err
		}
		if len(errs) > 0 {
			k.r.Findings = append(k.r.Findings, Finding{
				Message: fmt.Sprintf("SidecarSet %s would be refused by sidecarops: %v; it keeps injecting as stored, but updates to it are refused until it is fixed", ss.Name, errs.ToAggregate()),
				Fix:     k.checkCommand(ss.Name),
			})
			continue
		}
		earlier = append(earlier, ss)
	}
	return nil
}

// checkCommand is the sidecarctl check that judges SidecarSet name as this check did: with the
// whitelist the manager reads, and its gate.
func (k *checker) checkCommand(name string) string {
	get := fmt.Sprintf("kubectl get sidecarset %s -o yaml > %s.yaml && ", name, name)
	check := fmt.Sprintf("sidecarctl check -f %s.yaml", name)
	if k.whitelistCM != nil {
		get += fmt.Sprintf("kubectl -n %s get configmap %s -o yaml > %s.yaml && ", k.whitelistCM.Namespace, v1beta1.KruiseConfigurationName, v1beta1.KruiseConfigurationName)
		check += " -f " + v1beta1.KruiseConfigurationName + ".yaml"
	}
	if k.sidecarops.defaultsAllowed {
		check += " --patch-metadata-defaults-allowed"
	}
	return get + check
}
