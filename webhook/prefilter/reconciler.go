package prefilter

import (
	"context"
	"fmt"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	admissionv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
)

// FieldOwner is the server-side apply manager of the condition: it owns that one match condition
// and nothing else of the registration.
const FieldOwner = "sidecarops-prefilter"

// Reconciler keeps Condition of the cached SidecarSets on the pod webhook named Webhook of the
// MutatingWebhookConfiguration named Configuration, and removes it when every pod must be sent.
type Reconciler struct {
	// Client reads the manager's cache and applies the condition.
	Client        client.Client
	Configuration string
	Webhook       string
	// Unfiltered removes the condition and keeps it removed: a condition left by an earlier run
	// would otherwise go stale, hiding the pods of new SidecarSets from the webhook.
	Unfiltered bool
}

// CacheByObject restricts the cache to the one registration the Reconciler reads; merge it into
// the manager's cache options.
func CacheByObject(configuration string) map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&admissionregv1.MutatingWebhookConfiguration{}: {Field: fields.OneTermEqualSelector("metadata.name", configuration)},
	}
}

// SetupWithManager runs the Reconciler on the elected leader: on a change of the registration
// (re-applied manifests, a rotated caBundle) and of any SidecarSet's spec.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	key := reconcile.Request{NamespacedName: types.NamespacedName{Name: r.Configuration}}
	return builder.ControllerManagedBy(mgr).
		Named("prefilter").
		For(&admissionregv1.MutatingWebhookConfiguration{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == r.Configuration
		}))).
		Watches(&v1alpha1.SidecarSet{}, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{key}
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// Reconcile applies the condition the SidecarSets call for, when it differs from the registered one.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	logger := ctrllog.FromContext(ctx).WithValues("mutatingWebhookConfiguration", r.Configuration, "webhook", r.Webhook)
	cfg := &admissionregv1.MutatingWebhookConfiguration{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: r.Configuration}, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil // installed later: its creation reconciles again
		}
		return reconcile.Result{}, err
	}
	current, found := Registered(cfg, r.Webhook)
	if !found {
		logger.Error(nil, "the pod webhook is not registered under this name: every pod is sent to it unfiltered")
		return reconcile.Result{}, nil
	}
	expr, reason, err := r.desired(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	if expr == current {
		return reconcile.Result{}, nil
	}
	err = r.apply(ctx, expr)
	if apierrors.IsInvalid(err) && expr != "" {
		// The API server's CEL limits are its own to judge: a refused condition means every pod is
		// sent, as without one.
		logger.Error(err, "the API server refused the condition: every pod is sent to the webhook", "length", len(expr))
		expr, reason = "", "refused by the API server"
		if expr == current {
			return reconcile.Result{}, nil
		}
		err = r.apply(ctx, "")
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("applying the pod webhook's match condition: %w", err)
	}
	if expr == "" {
		logger.Info("pod webhook unfiltered: every pod is sent to it", "reason", reason)
	} else {
		logger.Info("pod webhook filtered: only pods a SidecarSet may inject into are sent to it", "length", len(expr))
	}
	return reconcile.Result{}, nil
}

// desired is the condition to register ("" for none, with the reason).
func (r *Reconciler) desired(ctx context.Context) (expr, reason string, err error) {
	if r.Unfiltered {
		return "", "the prefilter is off", nil
	}
	sets := &v1alpha1.SidecarSetList{}
	if err := r.Client.List(ctx, sets); err != nil {
		return "", "", err
	}
	ptrs := make([]*v1alpha1.SidecarSet, len(sets.Items))
	for i := range sets.Items {
		ptrs[i] = &sets.Items[i]
	}
	expr, filter, reason := Condition(ptrs)
	if !filter {
		return "", reason, nil
	}
	return expr, "", nil
}

// Registered is the expression of the prefilter's condition on the named webhook of cfg ("" when
// it has none) and whether that webhook exists.
func Registered(cfg *admissionregv1.MutatingWebhookConfiguration, webhook string) (string, bool) {
	for _, w := range cfg.Webhooks {
		if w.Name != webhook {
			continue
		}
		for _, c := range w.MatchConditions {
			if c.Name == ConditionName {
				return c.Expression, true
			}
		}
		return "", true
	}
	return "", false
}

// apply sets our condition to expr, or removes it when expr is empty: server-side apply drops
// the fields this manager applied before and no longer applies.
func (r *Reconciler) apply(ctx context.Context, expr string) error {
	w := admissionv1ac.MutatingWebhook().WithName(r.Webhook)
	if expr != "" {
		w = w.WithMatchConditions(admissionv1ac.MatchCondition().WithName(ConditionName).WithExpression(expr))
	}
	return r.Client.Apply(ctx, admissionv1ac.MutatingWebhookConfiguration(r.Configuration).WithWebhooks(w),
		client.FieldOwner(FieldOwner), client.ForceOwnership)
}
