package migrate

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/podwebhook"
)

// The names OpenKruise's Helm chart installs.
const (
	KruiseNamespace      = "kruise-system"
	KruiseManager        = "kruise-controller-manager"
	KruiseWebhookService = "kruise-webhook-service"
	crdName              = "sidecarsets.apps.kruise.io"
)

// Manager is the name of sidecarops' manager Deployment (config/manager, the chart).
const Manager = "sidecarops-manager"

// DefaultPageSize is how many pods one List call reads.
const DefaultPageSize = 500

// Options name the two installations.
type Options struct {
	// KruiseNamespace is OpenKruise's namespace (default kruise-system).
	KruiseNamespace string
	// Namespace and Service are sidecarops' namespace and webhook Service (defaults
	// sidecarops-system, sidecarops-webhook); Configuration its webhook configurations' name
	// (default sidecarops).
	Namespace, Service, Configuration string
	// PageSize is how many pods one List call reads (default DefaultPageSize).
	PageSize int64
}

func (o Options) withDefaults() Options {
	o.KruiseNamespace = cmp.Or(o.KruiseNamespace, KruiseNamespace)
	o.Namespace = cmp.Or(o.Namespace, podwebhook.DefaultNamespace)
	o.Service = cmp.Or(o.Service, "sidecarops-webhook")
	o.Configuration = cmp.Or(o.Configuration, podwebhook.ConfigurationName)
	o.PageSize = cmp.Or(o.PageSize, DefaultPageSize)
	return o
}

// Finding is one thing that blocks the switch (Blocker) or that the switch changes (a warning),
// with the command that deals with it.
type Finding struct {
	Blocker bool
	Message string
	Fix     string
}

// Report is what Check found.
type Report struct {
	// Path is the way of docs/migration.md the cluster takes: B when any of InUse, or any pod relies
	// on what OpenKruise's pod webhook does (Features); else A.
	Path Path
	// InUse counts the objects of each OpenKruise kind other than SidecarSet, where there are any.
	InUse []Use
	// KruisePodWebhook names OpenKruise's pod webhook where it is registered ("" where not).
	KruisePodWebhook string
	// Features are what OpenKruise's pod webhook does for the objects and pods here, one per kind of
	// use: kept while it stays registered (path B), lost with it (path A, or PodWebhook=false).
	Features []Feature
	// Found lists what is there, one line each.
	Found    []string
	Findings []Finding
}

// Blocked says whether anything blocks the switch.
func (r Report) Blocked() bool {
	return slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Blocker })
}

// Kept says whether what OpenKruise's pod webhook does (Features) goes on after the switch.
func (r Report) Kept() bool { return r.Path == PathB && r.KruisePodWebhook != "" }

// Check reads the cluster through c and reports which path of docs/migration.md the cluster takes
// and what blocks taking it over from OpenKruise.
func Check(ctx context.Context, c client.Reader, o Options) (Report, error) {
	k := &checker{c: c, o: o.withDefaults()}
	// The path comes first: whether OpenKruise's manager may keep running, and so what its webhooks
	// and controller block, depends on it; and it depends on the pods, read in one pass that also
	// finds those sidecarops' pod webhook will not see.
	for _, step := range []func(context.Context) error{
		k.checkKinds, k.readSidecarops, k.readWebhooks, k.readSidecarSets, k.checkPods, k.decidePath,
		k.checkCRD, k.checkFence, k.checkController, k.checkWebhooks, k.checkWhitelist, k.checkObjects, k.checkUnseen,
	} {
		if err := step(ctx); err != nil {
			return Report{}, err
		}
	}
	return k.r, nil
}

// checker holds what the steps of Check found and later steps depend on.
type checker struct {
	c client.Reader
	o Options
	r Report
	// kruiseRuns says that OpenKruise's manager Deployment has replicas.
	kruiseRuns bool
	// unfenced says what of the fence is missing, on path B; fenced holds the match conditions of
	// its policy where it is there.
	unfenced []string
	fenced   []string
	// sidecarops is the installed manager as its Deployment runs it.
	sidecarops installed
	// mutating and validating are the cluster's webhook configurations.
	mutating   []admissionregv1.MutatingWebhookConfiguration
	validating []admissionregv1.ValidatingWebhookConfiguration
	// view is which pods sidecarops' pod webhook sees, from viewSource.
	view       *podwebhook.View
	viewSource string
	// sets and revisions are the SidecarSets and their history, where setsServed.
	sets       []v1beta1.SidecarSet
	revisions  []appsv1.ControllerRevision
	setsServed bool
	// pods counts what the pass over the pods found.
	pods podCounts
	// whitelist is the whitelist document the installed manager reads (manifest.Whitelist), from
	// whitelistCM (nil: none).
	whitelist   map[string]any
	whitelistCM *corev1.ConfigMap
}

func (k *checker) checkCRD(ctx context.Context) error {
	c, o, r := k.c, k.o, &k.r
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			r.Found = append(r.Found, "no CustomResourceDefinition "+crdName+": there is nothing to take over")
			return nil
		}
		return fmt.Errorf("reading CustomResourceDefinition %s: %w", crdName, err)
	}
	var served []string
	stored := ""
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		if ok, _ := m["served"].(bool); ok {
			served = append(served, name)
		}
		if ok, _ := m["storage"].(bool); ok {
			stored = name
		}
	}
	strategy, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "strategy")
	svcName, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "service", "name")
	svcNS, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "service", "namespace")
	url, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "url")
	by := "none (strategy " + cmp.Or(strategy, "None") + ")"
	switch {
	case svcName != "":
		by = "Service " + svcNS + "/" + svcName
	case url != "":
		by = url
	}
	foreign := svcName != "" && (svcName != o.Service || svcNS != o.Namespace)
	if foreign && r.Path == PathB {
		// OpenKruise's manager keeps the CRD and rewrites its conversion on every certificate sync:
		// on path B it stays OpenKruise's, served as long as OpenKruise runs.
		by += ", OpenKruise's, kept on path B"
	}
	r.Found = append(r.Found, fmt.Sprintf("CustomResourceDefinition %s: served %s, stored %s, conversion by %s", crdName, strings.Join(served, ", "), stored, by))
	if foreign && r.Path == PathA {
		r.Findings = append(r.Findings, Finding{
			Blocker: true,
			Message: fmt.Sprintf("the SidecarSet CRD converts versions through Service %s/%s: once OpenKruise stops, every v1alpha1 read and write of a SidecarSet fails", svcNS, svcName),
			Fix:     "kubectl apply --server-side --force-conflicts -k config/crd   # sidecarops' CRD: conversion by " + o.Namespace + "/" + o.Service,
		})
	}
	return nil
}

// readWebhooks reads the webhook configurations, and from sidecarops' own which pods its pod webhook
// sees: the default install's where it is not installed yet.
func (k *checker) readWebhooks(ctx context.Context) error {
	var ms admissionregv1.MutatingWebhookConfigurationList
	if err := k.c.List(ctx, &ms); err != nil {
		return fmt.Errorf("listing MutatingWebhookConfigurations: %w", err)
	}
	var vs admissionregv1.ValidatingWebhookConfigurationList
	if err := k.c.List(ctx, &vs); err != nil {
		return fmt.Errorf("listing ValidatingWebhookConfigurations: %w", err)
	}
	k.mutating, k.validating = ms.Items, vs.Items
	i := slices.IndexFunc(k.mutating, func(m admissionregv1.MutatingWebhookConfiguration) bool { return m.Name == k.o.Configuration })
	if i < 0 {
		k.viewSource = fmt.Sprintf("as the chart installs it by default in %s (no MutatingWebhookConfiguration %s yet)", k.o.Namespace, k.o.Configuration)
		var err error
		k.view, err = podwebhook.Default(k.o.Namespace)
		return err
	}
	view, err := podwebhook.FromConfiguration(&k.mutating[i])
	if err != nil {
		k.r.Findings = append(k.r.Findings, Finding{
			Blocker: true,
			Message: fmt.Sprintf("sidecarops' pod webhook is not registered as installed: %v; no pod is injected", err),
			Fix:     fmt.Sprintf("helm upgrade sidecarops CHART -n %s --reuse-values   # or: kubectl apply --server-side -k config/default", k.o.Namespace),
		})
		return nil
	}
	k.view, k.viewSource = view, "of MutatingWebhookConfiguration "+k.o.Configuration
	return nil
}

func (k *checker) checkWebhooks(context.Context) error {
	o, r := k.o, &k.r
	for _, cfg := range k.mutating {
		for _, w := range cfg.Webhooks {
			if cfg.Name == o.Configuration || !isKruise(cfg.Name, w.ClientConfig) {
				continue
			}
			if covers(w.Rules, "", "pods") {
				k.kruisePodWebhook(w.Name, cfg.Name)
			}
			if covers(w.Rules, v1beta1.GroupVersion.Group, "sidecarsets") {
				r.Findings = append(r.Findings, k.kruiseSidecarSetWebhook(w.Name, "mutatingwebhookconfiguration", cfg.Name))
			}
		}
	}
	for _, cfg := range k.validating {
		for _, w := range cfg.Webhooks {
			if cfg.Name != o.Configuration && isKruise(cfg.Name, w.ClientConfig) && covers(w.Rules, v1beta1.GroupVersion.Group, "sidecarsets") {
				r.Findings = append(r.Findings, k.kruiseSidecarSetWebhook(w.Name, "validatingwebhookconfiguration", cfg.Name))
			}
		}
	}
	k.podFeatures()
	return nil
}

// kruisePodWebhook judges OpenKruise's pod webhook. On path A it goes with the rest of OpenKruise
// (with sidecarops' it would inject twice). On path B it stays, first, and sidecarops' pod webhook
// runs after it with --openkruise-kept, taking back what OpenKruise injected that sidecarops would
// not; it must then be served.
func (k *checker) kruisePodWebhook(webhook, cfg string) {
	r := &k.r
	r.KruisePodWebhook = fmt.Sprintf("%s (MutatingWebhookConfiguration %s)", webhook, cfg)
	switch {
	case r.Path == PathA:
		r.Findings = append(r.Findings, Finding{
			Blocker: true,
			Message: fmt.Sprintf("OpenKruise's pod webhook %s is registered: with sidecarops' it would inject twice", r.KruisePodWebhook),
			Fix:     fmt.Sprintf("kubectl delete mutatingwebhookconfiguration %s   # path A: after OpenKruise's manager is stopped, or it registers it again", cfg),
		})
	case !k.kruiseRuns:
		r.Findings = append(r.Findings, Finding{
			Blocker: true,
			Message: fmt.Sprintf("OpenKruise's pod webhook %s is registered and no OpenKruise manager serves it: pod creations fail or go without it, by its failurePolicy", r.KruisePodWebhook),
			Fix:     fmt.Sprintf("kubectl -n %s scale deployment %s --replicas=1   # path B keeps OpenKruise running", k.o.KruiseNamespace, KruiseManager),
		})
	case k.sidecarops.found && !k.sidecarops.openKruiseKept:
		r.Findings = append(r.Findings, Finding{
			Blocker: true,
			Message: fmt.Sprintf("sidecarops' manager (Deployment %s/%s) runs without --openkruise-kept while OpenKruise's pod webhook %s injects first: the pods OpenKruise injects keep what it injected where sidecarops' gates, whitelist or collision rules would not inject", k.o.Namespace, Manager, r.KruisePodWebhook),
			Fix:     fmt.Sprintf("helm upgrade sidecarops CHART -n %s --reuse-values --set openkruise.fence.enabled=true   # it sets --openkruise-kept; without Helm, add --openkruise-kept to the manager's args", k.o.Namespace),
		})
	}
}

// podFeatures says, on path B, what goes where OpenKruise's pod webhook is not registered
// (PodWebhook=false, as path B once asked).
func (k *checker) podFeatures() {
	r := &k.r
	if r.Path != PathB || r.KruisePodWebhook != "" || len(r.Features) == 0 {
		return
	}
	r.Findings = append(r.Findings, Finding{
		Message: "OpenKruise's pod webhook is not registered (PodWebhook=false in its manager's feature gates, or OpenKruise not running): what it does for the objects and pods listed as lost is not done; path B keeps it on",
		Fix:     fmt.Sprintf("helm upgrade kruise openkruise/kruise --reuse-values --set featureGates='...'   # the gates of helm get values kruise --all, without PodWebhook=false; without Helm, drop PodWebhook=false from %s's --feature-gates", KruiseManager),
	})
}

// kruiseSidecarSetWebhook blocks when no OpenKruise manager serves it (every SidecarSet write then
// fails). On path B with the manager running it is served, and sidecarops' manager with
// --openkruise-kept removes it from OpenKruise's configurations and from the template OpenKruise
// rebuilds them from; until then a SidecarSet write passes both validations.
func (k *checker) kruiseSidecarSetWebhook(webhook, kind, cfg string) Finding {
	if k.r.Path == PathB && k.kruiseRuns {
		f := Finding{
			Message: fmt.Sprintf("OpenKruise's SidecarSet webhook %s (%s %s) is registered: a SidecarSet write waits on OpenKruise being up and must pass its validation as well as sidecarops', which differ where docs/decisions.md says (D2, D3); sidecarops' manager, installed with openkruise.fence.enabled (--openkruise-kept), removes it and keeps it removed", webhook, kind, cfg),
			Fix:     fmt.Sprintf("helm upgrade sidecarops CHART -n %s --reuse-values --set openkruise.fence.enabled=true   # without Helm, --openkruise-kept in the manager's args", k.o.Namespace),
		}
		if k.sidecarops.openKruiseKept {
			f.Fix = fmt.Sprintf("none: sidecarops' manager (Deployment %s/%s) runs with --openkruise-kept and removes it once it is up; if it stays, see the manager's log", k.o.Namespace, Manager)
		}
		return f
	}
	return Finding{
		Blocker: true,
		Message: fmt.Sprintf("OpenKruise's SidecarSet webhook %s (%s %s) is registered: once OpenKruise stops, it refuses every SidecarSet write", webhook, kind, cfg),
		Fix:     fmt.Sprintf("kubectl delete %s %s   # after OpenKruise's controller is stopped, or it registers it again", kind, cfg),
	}
}

// isKruise says whether a webhook is OpenKruise's: served by its Service, or registered under
// its chart's names.
func isKruise(cfg string, cc admissionregv1.WebhookClientConfig) bool {
	return strings.HasPrefix(cfg, "kruise-") || (cc.Service != nil && cc.Service.Name == KruiseWebhookService)
}

// covers says whether rules match CREATE of resource in group.
func covers(rules []admissionregv1.RuleWithOperations, group, resource string) bool {
	for _, rule := range rules {
		if anyOf(rule.APIGroups, group) && anyOf(rule.Resources, resource) &&
			slices.ContainsFunc(rule.Operations, func(op admissionregv1.OperationType) bool {
				return op == admissionregv1.Create || op == admissionregv1.OperationAll
			}) {
			return true
		}
	}
	return false
}

func anyOf(list []string, want string) bool {
	return slices.Contains(list, want) || slices.Contains(list, "*")
}

func (k *checker) checkController(ctx context.Context) error {
	c, o, r := k.c, k.o, &k.r
	var d appsv1.Deployment
	err := c.Get(ctx, client.ObjectKey{Namespace: o.KruiseNamespace, Name: KruiseManager}, &d)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading Deployment %s/%s: %w", o.KruiseNamespace, KruiseManager, err)
	}
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	r.Found = append(r.Found, fmt.Sprintf("OpenKruise's manager: Deployment %s/%s, %d replica(s)", o.KruiseNamespace, KruiseManager, replicas))
	k.kruiseRuns = replicas > 0
	switch {
	case !k.kruiseRuns:
	case r.Path == PathB && len(k.unfenced) == 0:
		// The fence names OpenKruise's manager by one literal: a ServiceAccount other than its
		// chart's leaves the manager outside it.
		sa := cmp.Or(d.Spec.Template.Spec.ServiceAccountName, "default")
		user := "system:serviceaccount:" + o.KruiseNamespace + ":" + sa
		if !slices.ContainsFunc(k.fenced, func(e string) bool { return strings.Contains(e, "'"+user+"'") }) {
			r.Findings = append(r.Findings, Finding{
				Blocker: true,
				Message: fmt.Sprintf("the fence does not name the user OpenKruise's manager runs as (%s), so it refuses that manager nothing", user),
				Fix:     fmt.Sprintf("helm upgrade sidecarops CHART -n %s --reuse-values --set openkruise.fence.serviceAccount=%s/%s   # or patch /spec/matchConditions/0/expression of the fence's policy", o.Namespace, o.KruiseNamespace, sa),
			})
			break
		}
		r.Found = append(r.Found, "OpenKruise's manager keeps running for its other workloads; the fence refuses its SidecarSet controller's writes")
	case r.Path == PathB:
		r.Findings = append(r.Findings, Finding{
			Blocker: true,
			Message: fmt.Sprintf("OpenKruise's manager runs (Deployment %s/%s, %d replica(s)) and the fence is not installed (%s): OpenKruise's SidecarSet controller and sidecarops' would both upgrade the SidecarSets' pods and write their status", o.KruiseNamespace, KruiseManager, replicas, strings.Join(k.unfenced, "; ")),
			Fix:     "helm upgrade sidecarops CHART -n " + o.Namespace + " --reuse-values --set openkruise.fence.enabled=true   # or: kubectl apply --server-side -k config/samples/kruise-coexist",
		})
	default:
		r.Findings = append(r.Findings, Finding{
			Blocker: true,
			Message: fmt.Sprintf("OpenKruise's controller runs (Deployment %s/%s, %d replica(s)): it and sidecarops would both upgrade the SidecarSets' pods", o.KruiseNamespace, KruiseManager, replicas),
			Fix:     fmt.Sprintf("kubectl -n %s scale deployment %s --replicas=0   # path A: nothing else of OpenKruise is in use; then remove its webhook registrations", o.KruiseNamespace, KruiseManager),
		})
	}
	return nil
}

// readSidecarSets lists the SidecarSets and their history: what sidecarops will adopt.
func (k *checker) readSidecarSets(ctx context.Context) error {
	var sets v1beta1.SidecarSetList
	if err := k.c.List(ctx, &sets); err != nil {
		if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
			return nil // no CRD: reported by checkCRD
		}
		return fmt.Errorf("listing SidecarSets: %w", err)
	}
	k.sets, k.setsServed = sets.Items, true
	var crs appsv1.ControllerRevisionList
	if err := k.c.List(ctx, &crs, client.InNamespace(k.o.KruiseNamespace), client.HasLabels{v1beta1.SidecarSetNameLabel}); err != nil {
		return fmt.Errorf("listing ControllerRevisions in %s: %w", k.o.KruiseNamespace, err)
	}
	k.revisions = crs.Items
	return nil
}

// checkObjects counts what sidecarops will adopt, and names the SidecarSets sidecarops would
// refuse: they keep injecting as stored, but every update to them is refused until they are fixed.
func (k *checker) checkObjects(ctx context.Context) error {
	o, r := k.o, &k.r
	if !k.setsServed {
		return nil
	}
	r.Found = append(r.Found, fmt.Sprintf("%d SidecarSet(s), %d of their ControllerRevisions in %s, %d pod(s) injected", len(k.sets), len(k.revisions), o.KruiseNamespace, k.pods.injected))
	if len(k.revisions) > 0 && o.KruiseNamespace != o.Namespace {
		r.Findings = append(r.Findings, Finding{
			Message: fmt.Sprintf("the SidecarSets' history is in %s: run the manager with it, or history-based injection and rollbacks lose it", o.KruiseNamespace),
			Fix:     fmt.Sprintf("sidecarops-manager --revision-namespace=%s   # and grant the manager's Role there", o.KruiseNamespace),
		})
	}
	return k.checkVerdicts(ctx)
}
