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
	// Found lists what is there, one line each.
	Found    []string
	Findings []Finding
}

// Blocked says whether anything blocks the switch.
func (r Report) Blocked() bool {
	return slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Blocker })
}

// Check reads the cluster through c and reports what blocks taking it over from OpenKruise.
func Check(ctx context.Context, c client.Reader, o Options) (Report, error) {
	o = o.withDefaults()
	var r Report
	for _, step := range []func(context.Context, client.Reader, Options, *Report) error{checkCRD, checkWebhooks, checkController, checkObjects} {
		if err := step(ctx, c, o, &r); err != nil {
			return Report{}, err
		}
	}
	return r, nil
}

func checkCRD(ctx context.Context, c client.Reader, o Options, r *Report) error {
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

func checkWebhooks(ctx context.Context, c client.Reader, o Options, r *Report) error {
	var ms admissionregv1.MutatingWebhookConfigurationList
	if err := c.List(ctx, &ms); err != nil {
		return fmt.Errorf("listing MutatingWebhookConfigurations: %w", err)
	}
	for _, cfg := range ms.Items {
		for i, w := range cfg.Webhooks {
			if cfg.Name == o.Configuration || !isKruise(cfg.Name, w.ClientConfig) {
				continue
			}
			if covers(w.Rules, "", "pods") {
				r.Findings = append(r.Findings, Finding{
					Blocker: true,
					Message: fmt.Sprintf("OpenKruise's pod webhook %s (MutatingWebhookConfiguration %s) is registered: with sidecarops' it would inject twice", w.Name, cfg.Name),
					Fix: fmt.Sprintf("helm upgrade kruise openkruise/kruise -n %s --reuse-values --set featureGates=PodWebhook=false   # or, with OpenKruise stopped: kubectl patch mutatingwebhookconfiguration %s --type=json -p '[{\"op\":\"remove\",\"path\":\"/webhooks/%d\"}]'",
						o.KruiseNamespace, cfg.Name, i),
				})
			}
			if covers(w.Rules, v1beta1.GroupVersion.Group, "sidecarsets") {
				r.Findings = append(r.Findings, kruiseSidecarSetWebhook(w.Name, "mutatingwebhookconfiguration", cfg.Name))
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
				r.Findings = append(r.Findings, kruiseSidecarSetWebhook(w.Name, "validatingwebhookconfiguration", cfg.Name))
			}
		}
	}
	return nil
}

func kruiseSidecarSetWebhook(webhook, kind, cfg string) Finding {
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

func checkController(ctx context.Context, c client.Reader, o Options, r *Report) error {
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
	if replicas > 0 {
		r.Findings = append(r.Findings, Finding{
			Blocker: true,
			Message: fmt.Sprintf("OpenKruise's controller runs (Deployment %s/%s, %d replica(s)): it and sidecarops would both upgrade the SidecarSets' pods", o.KruiseNamespace, KruiseManager, replicas),
			Fix:     fmt.Sprintf("kubectl -n %s scale deployment %s --replicas=0   # it also serves OpenKruise's other webhooks: stop it only when nothing else of OpenKruise is in use, then remove its webhook registrations", o.KruiseNamespace, KruiseManager),
		})
	}
	return nil
}

// checkObjects counts what sidecarops will adopt, and names the SidecarSets sidecarops would
// refuse: they keep injecting as stored, but every update to them is refused until they are fixed.
func checkObjects(ctx context.Context, c client.Reader, o Options, r *Report) error {
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
