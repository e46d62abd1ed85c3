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
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/sidecarset/defaults"
)

// The names OpenKruise's Helm chart installs.
const (
	KruiseNamespace      = "kruise-system"
	KruiseManager        = "kruise-controller-manager"
	KruiseWebhookService = "kruise-webhook-service"
	crdName              = "sidecarsets.apps.kruise.io"
)

// Options name the two installations.
type Options struct {
	// KruiseNamespace is OpenKruise's namespace (default kruise-system).
	KruiseNamespace string
	// Namespace and Service are sidecarops' namespace and webhook Service (defaults
	// sidecarops-system, sidecarops-webhook); Configuration its webhook configurations' name
	// (default sidecarops).
	Namespace, Service, Configuration string
}

func (o Options) withDefaults() Options {
	o.KruiseNamespace = cmp.Or(o.KruiseNamespace, KruiseNamespace)
	o.Namespace = cmp.Or(o.Namespace, "sidecarops-system")
	o.Service = cmp.Or(o.Service, "sidecarops-webhook")
	o.Configuration = cmp.Or(o.Configuration, "sidecarops")
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
	// Path is the way of docs/migration.md the cluster takes: B when any of InUse, else A.
	Path Path
	// InUse counts the objects of each OpenKruise kind other than SidecarSet, where there are any.
	InUse []Use
	// Losses are what OpenKruise stops doing, with its pod webhook off, for the objects and pods
	// here that rely on it, one line each.
	Losses []string
	// Found lists what is there, one line each.
	Found    []string
	Findings []Finding
}

// Blocked says whether anything blocks the switch.
func (r Report) Blocked() bool {
	return slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Blocker })
}

// Check reads the cluster through c and reports which path of docs/migration.md the cluster takes
// and what blocks taking it over from OpenKruise.
func Check(ctx context.Context, c client.Reader, o Options) (Report, error) {
	k := &checker{c: c, o: o.withDefaults()}
	// The path comes first: whether OpenKruise's manager may keep running, and so what its webhooks
	// and controller block, depends on it.
	for _, step := range []func(context.Context) error{k.checkCRD, k.checkKinds, k.checkFence, k.checkController, k.checkWebhooks, k.checkObjects} {
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
	// each of its policies that are there.
	unfenced []string
	fenced   [][]string
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
	r.Found = append(r.Found, fmt.Sprintf("CustomResourceDefinition %s: served %s, stored %s, conversion by %s", crdName, strings.Join(served, ", "), stored, by))
	if svcName != "" && (svcName != o.Service || svcNS != o.Namespace) {
		r.Findings = append(r.Findings, Finding{
			Blocker: true,
			Message: fmt.Sprintf("the SidecarSet CRD converts versions through Service %s/%s: once OpenKruise stops, every v1alpha1 read and write of a SidecarSet fails", svcNS, svcName),
			Fix:     "kubectl apply --server-side --force-conflicts -k config/crd   # sidecarops' CRD: conversion by " + o.Namespace + "/" + o.Service,
		})
	}
	return nil
}

func (k *checker) checkWebhooks(ctx context.Context) error {
	c, o, r := k.c, k.o, &k.r
	var ms admissionregv1.MutatingWebhookConfigurationList
	if err := c.List(ctx, &ms); err != nil {
		return fmt.Errorf("listing MutatingWebhookConfigurations: %w", err)
	}
	for _, cfg := range ms.Items {
		for _, w := range cfg.Webhooks {
			if cfg.Name == o.Configuration || !isKruise(cfg.Name, w.ClientConfig) {
				continue
			}
			if covers(w.Rules, "", "pods") {
				r.Findings = append(r.Findings, k.kruisePodWebhook(w.Name, cfg.Name))
			}
			if covers(w.Rules, v1beta1.GroupVersion.Group, "sidecarsets") {
				r.Findings = append(r.Findings, k.kruiseSidecarSetWebhook(w.Name, "mutatingwebhookconfiguration", cfg.Name))
			}
		}
	}
	var vs admissionregv1.ValidatingWebhookConfigurationList
	if err := c.List(ctx, &vs); err != nil {
		return fmt.Errorf("listing ValidatingWebhookConfigurations: %w", err)
	}
	for _, cfg := range vs.Items {
		for _, w := range cfg.Webhooks {
			if cfg.Name != o.Configuration && isKruise(cfg.Name, w.ClientConfig) && covers(w.Rules, v1beta1.GroupVersion.Group, "sidecarsets") {
				r.Findings = append(r.Findings, k.kruiseSidecarSetWebhook(w.Name, "validatingwebhookconfiguration", cfg.Name))
			}
		}
	}
	return nil
}

// kruisePodWebhook blocks on either path: with sidecarops' pod webhook, OpenKruise's would inject
// the same sidecars a second time. Path A removes it with the rest of OpenKruise; path B turns it off
// in OpenKruise, whose manager would otherwise register it again.
func (k *checker) kruisePodWebhook(webhook, cfg string) Finding {
	f := Finding{
		Blocker: true,
		Message: fmt.Sprintf("OpenKruise's pod webhook %s (MutatingWebhookConfiguration %s) is registered: with sidecarops' it would inject twice", webhook, cfg),
		Fix:     fmt.Sprintf("kubectl delete mutatingwebhookconfiguration %s   # path A: after OpenKruise's manager is stopped, or it registers it again", cfg),
	}
	if k.r.Path == PathB {
		f.Fix = fmt.Sprintf("helm upgrade kruise openkruise/kruise --reuse-values --set crds.managed=false --set featureGates='PodWebhook=false'   # path B (docs/migration.md, step 5): first helm.sh/resource-policy=keep on every kruise.io CRD; keep the gates already set, comma-separated (helm get values kruise --all); without Helm, --feature-gates=PodWebhook=false in %s's args. Its manager then drops %s from %s itself",
			KruiseManager, webhook, cfg)
	}
	return f
}

// kruiseSidecarSetWebhook blocks when no OpenKruise manager serves it (every SidecarSet write then
// fails). On path B with the manager running, it is served and registered again whatever is done
// to it: SidecarSet writes then pass both OpenKruise's validation and sidecarops'.
func (k *checker) kruiseSidecarSetWebhook(webhook, kind, cfg string) Finding {
	if k.r.Path == PathB && k.kruiseRuns {
		return Finding{
			Message: fmt.Sprintf("OpenKruise's SidecarSet webhook %s (%s %s) stays with OpenKruise's manager: a SidecarSet write waits on OpenKruise being up and must pass its validation as well as sidecarops', which differ where docs/decisions.md says (D2, D3)", webhook, kind, cfg),
			Fix:     "sidecarctl check -f SIDECARSET.yaml   # sidecarops' verdict; OpenKruise's manager registers its webhook again while it runs",
		}
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
		names := func(e string) bool { return strings.Contains(e, "'"+user+"'") }
		if slices.ContainsFunc(k.fenced, func(policy []string) bool { return !slices.ContainsFunc(policy, names) }) {
			r.Findings = append(r.Findings, Finding{
				Blocker: true,
				Message: fmt.Sprintf("the fence does not name the user OpenKruise's manager runs as (%s), so it refuses that manager nothing", user),
				Fix:     fmt.Sprintf("helm upgrade sidecarops CHART -n %s --reuse-values --set openkruise.fence.serviceAccount=%s/%s   # or patch /spec/matchConditions/0/expression of both fence policies", o.Namespace, o.KruiseNamespace, sa),
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

// checkObjects counts what sidecarops will adopt, and names the SidecarSets sidecarops would
// refuse: they keep injecting as stored, but every update to them is refused until they are fixed.
func (k *checker) checkObjects(ctx context.Context) error {
	c, o, r := k.c, k.o, &k.r
	var sets v1beta1.SidecarSetList
	if err := c.List(ctx, &sets); err != nil {
		if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
			return nil // no CRD: reported already
		}
		return fmt.Errorf("listing SidecarSets: %w", err)
	}
	var crs appsv1.ControllerRevisionList
	if err := c.List(ctx, &crs, client.InNamespace(o.KruiseNamespace), client.HasLabels{v1beta1.SidecarSetNameLabel}); err != nil {
		return fmt.Errorf("listing ControllerRevisions in %s: %w", o.KruiseNamespace, err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods); err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	injected := 0
	for _, p := range pods.Items {
		if p.Annotations[v1beta1.SidecarSetListAnnotation] != "" {
			injected++
		}
	}
	r.Found = append(r.Found, fmt.Sprintf("%d SidecarSet(s), %d of their ControllerRevisions in %s, %d pod(s) injected", len(sets.Items), len(crs.Items), o.KruiseNamespace, injected))
	r.Losses = append(r.Losses, podLosses(pods.Items)...)
	if len(crs.Items) > 0 && o.KruiseNamespace != o.Namespace {
		r.Findings = append(r.Findings, Finding{
			Message: fmt.Sprintf("the SidecarSets' history is in %s: run the manager with it, or history-based injection and rollbacks lose it", o.KruiseNamespace),
			Fix:     fmt.Sprintf("sidecarops-manager --revision-namespace=%s   # and grant the manager's Role there", o.KruiseNamespace),
		})
	}
	return checkVerdicts(ctx, sets.Items, crs.Items, r)
}

// checkVerdicts validates each SidecarSet as sidecarops' validating webhook would, against the
// ones created before it.
func checkVerdicts(ctx context.Context, items []v1beta1.SidecarSet, crs []appsv1.ControllerRevision, r *Report) error {
	slices.SortStableFunc(items, func(a, b v1beta1.SidecarSet) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	revs := make([]*appsv1.ControllerRevision, len(crs))
	for i := range crs {
		revs[i] = &crs[i]
	}
	var earlier []*v1beta1.SidecarSet
	for i := range items {
		ss := items[i].DeepCopy()
		if err := defaults.SidecarSetAndHash(ss); err != nil {
			return fmt.Errorf("SidecarSet %s: %w", ss.Name, err)
		}
		snap, err := injector.Snapshot(ctx, injector.Policies{State: bundles.State{SidecarSets: earlier, ControllerRevisions: revs}})
		if err != nil {
			return err
		}
		errs, err := injector.ValidateSidecarSet(ctx, snap, ss.DeepCopy(), nil)
		if err != nil {
			return err
		}
		if len(errs) > 0 {
			r.Findings = append(r.Findings, Finding{
				Message: fmt.Sprintf("SidecarSet %s would be refused by sidecarops: %v; it keeps injecting as stored, but updates to it are refused until it is fixed", ss.Name, errs.ToAggregate()),
				Fix:     fmt.Sprintf("kubectl get sidecarset %s -o yaml > %s.yaml && sidecarctl check -f %s.yaml", ss.Name, ss.Name, ss.Name),
			})
			continue
		}
		earlier = append(earlier, ss)
	}
	return nil
}
