package coexist

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// OpenKruise's webhook configurations: the names are constants of its webhook controller.
const (
	MutatingConfiguration   = "kruise-mutating-webhook-configuration"
	ValidatingConfiguration = "kruise-validating-webhook-configuration"
	// TemplateAnnotation holds, on each configuration, the copy of its webhooks that OpenKruise's
	// webhook controller rebuilds them from at every certificate sync: an entry removed from the
	// webhooks alone would come back with the next sync.
	TemplateAnnotation = "template"
)

// WebhookKeeper keeps OpenKruise's SidecarSet webhooks (msidecarset.kb.io, vsidecarset.kb.io: every
// webhook whose rules are about SidecarSets alone) out of its two webhook configurations and their
// template, on every change of either. OpenKruise's manager starts no SidecarSet webhook that its
// configuration does not list, and its pod webhook and the others keep serving.
type WebhookKeeper struct {
	// Client writes the configurations.
	Client client.Writer
	// reader reads them from the keeper's own cache, which holds these two objects only.
	reader client.Reader
}

// SetupWithManager runs the keeper on the elected leader, watching the two configurations through a
// cache of its own: the manager's cache holds sidecarops' configuration only (package prefilter),
// and a field selector names one object.
func (k *WebhookKeeper) SetupWithManager(mgr manager.Manager) error {
	byName := func(name string) cache.ByObject {
		return cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", name)}
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			&admissionregv1.MutatingWebhookConfiguration{}:   byName(MutatingConfiguration),
			&admissionregv1.ValidatingWebhookConfiguration{}: byName(ValidatingConfiguration),
		},
	})
	if err != nil {
		return fmt.Errorf("coexist: the cache of OpenKruise's webhook configurations: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return err
	}
	k.reader = c
	return builder.ControllerManagedBy(mgr).
		Named("openkruise-webhooks").
		WatchesRawSource(source.Kind(c, &admissionregv1.MutatingWebhookConfiguration{}, &handler.TypedEnqueueRequestForObject[*admissionregv1.MutatingWebhookConfiguration]{})).
		WatchesRawSource(source.Kind(c, &admissionregv1.ValidatingWebhookConfiguration{}, &handler.TypedEnqueueRequestForObject[*admissionregv1.ValidatingWebhookConfiguration]{})).
		Complete(k)
}

// Reconcile removes the SidecarSet webhooks from the named configuration and its template.
func (k *WebhookKeeper) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var obj client.Object
	var removed []string
	var err error
	switch req.Name {
	case MutatingConfiguration:
		cfg := &admissionregv1.MutatingWebhookConfiguration{}
		if err := k.reader.Get(ctx, req.NamespacedName, cfg); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		obj = cfg
		cfg.Webhooks, removed = withoutSidecarSets(cfg.Webhooks, func(w admissionregv1.MutatingWebhook) (string, []admissionregv1.RuleWithOperations) {
			return w.Name, w.Rules
		})
		removed, err = stripTemplate(cfg.Annotations, removed, func(w admissionregv1.MutatingWebhook) (string, []admissionregv1.RuleWithOperations) {
			return w.Name, w.Rules
		})
	case ValidatingConfiguration:
		cfg := &admissionregv1.ValidatingWebhookConfiguration{}
		if err := k.reader.Get(ctx, req.NamespacedName, cfg); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		obj = cfg
		cfg.Webhooks, removed = withoutSidecarSets(cfg.Webhooks, func(w admissionregv1.ValidatingWebhook) (string, []admissionregv1.RuleWithOperations) {
			return w.Name, w.Rules
		})
		removed, err = stripTemplate(cfg.Annotations, removed, func(w admissionregv1.ValidatingWebhook) (string, []admissionregv1.RuleWithOperations) {
			return w.Name, w.Rules
		})
	default:
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("%s: %w", req.Name, err)
	}
	if len(removed) == 0 {
		return reconcile.Result{}, nil
	}
	// The cached resourceVersion makes the update fail on a newer object, whose watch event brings
	// the keeper back.
	if err := k.Client.Update(ctx, obj); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("removing OpenKruise's SidecarSet webhooks from %s: %w", req.Name, err)
	}
	ctrllog.FromContext(ctx).Info("removed OpenKruise's SidecarSet webhooks: sidecarops defaults and validates SidecarSets", "configuration", req.Name, "webhooks", removed)
	return reconcile.Result{}, nil
}

// isSidecarSetWebhook says whether every rule of a webhook is about SidecarSets alone, as
// OpenKruise's msidecarset.kb.io and vsidecarset.kb.io are; its pod webhook and the others are not.
func isSidecarSetWebhook(rules []admissionregv1.RuleWithOperations) bool {
	if len(rules) == 0 {
		return false
	}
	for _, r := range rules {
		if !slices.Equal(r.APIGroups, []string{"apps.kruise.io"}) || len(r.Resources) == 0 {
			return false
		}
		for _, res := range r.Resources {
			if res != "sidecarsets" && res != "sidecarsets/status" {
				return false
			}
		}
	}
	return true
}

// withoutSidecarSets returns hooks without the SidecarSet webhooks, and their names.
func withoutSidecarSets[W any](hooks []W, of func(W) (string, []admissionregv1.RuleWithOperations)) ([]W, []string) {
	var removed []string
	kept := slices.DeleteFunc(slices.Clone(hooks), func(w W) bool {
		name, rules := of(w)
		if isSidecarSetWebhook(rules) {
			removed = append(removed, name)
			return true
		}
		return false
	})
	return kept, removed
}

// stripTemplate removes the SidecarSet webhooks from the template annotation, adding their names
// to removed. A template that does not parse is left alone: OpenKruise's webhook controller fails
// on it too, and rewriting it would lose what its owner meant.
func stripTemplate[W any](ann map[string]string, removed []string, of func(W) (string, []admissionregv1.RuleWithOperations)) ([]string, error) {
	raw, ok := ann[TemplateAnnotation]
	if !ok {
		return removed, nil
	}
	// Each webhook is kept as the JSON it is: decoding into the typed list and encoding again
	// would drop fields this client's types do not know.
	var entries []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &entries); err != nil {
		return removed, nil
	}
	kept := entries[:0]
	for _, e := range entries {
		var w W
		if err := json.Unmarshal(e, &w); err == nil {
			if name, rules := of(w); isSidecarSetWebhook(rules) {
				if !slices.Contains(removed, name) {
					removed = append(removed, name)
				}
				continue
			}
		}
		kept = append(kept, e)
	}
	if len(kept) == len(entries) {
		return removed, nil
	}
	value, err := json.Marshal(kept)
	if err != nil {
		return removed, fmt.Errorf("encoding the %s annotation: %w", TemplateAnnotation, err)
	}
	ann[TemplateAnnotation] = string(value)
	return removed, nil
}
