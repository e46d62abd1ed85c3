package prefilter

import (
	"context"
	"fmt"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	admissionv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/podwebhook"
)

// FieldOwner is the server-side apply manager of the filter: it owns that one match condition, the
// pod webhook's object selector (unless an administrator set one: then it leaves it to them) and
// nothing else of the registration.
const FieldOwner = "sidecarops-prefilter"

// Reconciler keeps the Filter of the cached SidecarSets (Compile) on the pod webhook named Webhook
// of the MutatingWebhookConfiguration named Configuration, and removes it when every pod must be sent.
type Reconciler struct {
	// Client reads the manager's cache and applies the condition.
	Client        client.Client
	Configuration string
	Webhook       string
	// Unfiltered removes the condition and keeps it removed: a condition left by an earlier run
	// would otherwise go stale, hiding the pods of new SidecarSets from the webhook.
	Unfiltered bool
	// Grace is how long a term added at admission (Widener) is kept (0: DefaultGrace).
	Grace time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// CacheByObject restricts the cache to the one registration the Reconciler reads; merge it into
// the manager's cache options. The registration keeps its managedFields, whatever the cache's
// default transform strips: they are how the Reconciler tells an administrator's object selector
// (selectorOwnedByOthers), which it must leave alone, from its own.
func CacheByObject(configuration string) map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&admissionregv1.MutatingWebhookConfiguration{}: {
			Field:     fields.OneTermEqualSelector("metadata.name", configuration),
			Transform: func(o any) (any, error) { return o, nil },
		},
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
		Watches(&v1beta1.SidecarSet{}, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{key}
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// Reconcile applies the condition the SidecarSets call for, widened by the terms admitted within
// the grace period, when it differs from the registered one.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	logger := ctrllog.FromContext(ctx).WithValues("mutatingWebhookConfiguration", r.Configuration, "webhook", r.Webhook)
	cfg := &admissionregv1.MutatingWebhookConfiguration{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: r.Configuration}, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil // installed later: its creation reconciles again
		}
		return reconcile.Result{}, err
	}
	current, foreign, found := ownFilter(cfg, r.Webhook)
	if !found {
		logger.Error(nil, "the pod webhook is not registered under this name: every pod is sent to it unfiltered")
		return reconcile.Result{}, nil
	}
	computed, reason, seen, err := r.desired(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	var admitted []Admitted
	if !r.Unfiltered {
		if admitted, err = admittedOf(cfg); err != nil {
			logger.Error(err, "dropping the admitted terms")
		}
	}
	expr, keep, requeue := merged(computed.CEL(), admitted, seen, clock(r.Now), grace(r.Grace))
	want := computed
	if len(keep) > 0 || foreign {
		// Terms admitted meanwhile, which the selector may not cover; or no selector of ours to
		// set: the condition alone says it all.
		want = Filter{Expression: expr}
	}
	annotation := encodeAdmitted(keep)
	if want.Expression == current.Expression && apiequality.Semantic.DeepEqual(want.Selector, current.Selector) && annotation == cfg.Annotations[AdmittedAnnotation] {
		return reconcile.Result{RequeueAfter: requeue}, nil
	}
	// Conditional on what was read: a term another replica admitted since is never overwritten.
	err = apply(ctx, r.Client, r.Configuration, r.Webhook, cfg.ResourceVersion, want, annotation)
	if apierrors.IsInvalid(err) && want.Filtered() {
		// The API server's CEL limits are its own to judge: a refused filter means every pod is
		// sent, as without one.
		logger.Error(err, "the API server refused the filter: every pod is sent to the webhook", "length", len(want.Expression))
		want, reason = Filter{}, "refused by the API server"
		err = apply(ctx, r.Client, r.Configuration, r.Webhook, cfg.ResourceVersion, want, annotation)
	}
	if apierrors.IsConflict(err) {
		// The cache has not seen the newer registration yet; its event reconciles again, and this
		// is the fallback should that event be missed.
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("applying the pod webhook's filter: %w", err)
	}
	switch {
	case !want.Filtered():
		logger.Info("pod webhook unfiltered: every pod is sent to it", "reason", reason)
	default:
		logger.Info("pod webhook filtered: only pods a SidecarSet may inject into are sent to it",
			"objectSelector", want.Selector != nil, "conditionLength", len(want.Expression), "admittedTerms", len(keep))
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// desired is the filter to register (none, with the reason, when every pod must be sent), and
// each cached SidecarSet's own term by name (what an admitted term is compared with).
func (r *Reconciler) desired(ctx context.Context) (f Filter, reason string, seen map[string]string, err error) {
	if r.Unfiltered {
		return Filter{}, "the prefilter is off", nil, nil
	}
	sets := &v1beta1.SidecarSetList{}
	if err := r.Client.List(ctx, sets); err != nil {
		return Filter{}, "", nil, err
	}
	ptrs := make([]*v1beta1.SidecarSet, len(sets.Items))
	seen = make(map[string]string, len(sets.Items))
	for i := range sets.Items {
		ptrs[i] = &sets.Items[i]
		seen[ptrs[i].Name] = termOf(ptrs[i])
	}
	f, _, reason = Compile(ptrs)
	return f, reason, seen, nil
}

// apply registers f, removing what f leaves out, and the admitted terms as annotation (removed
// when empty): server-side apply drops the fields this manager applied before and no longer
// applies. A resourceVersion makes it conditional on the registration being the one read (a
// Conflict otherwise).
func apply(ctx context.Context, c client.Writer, configuration, webhook, resourceVersion string, f Filter, annotation string) error {
	w := admissionv1ac.MutatingWebhook().WithName(webhook)
	if f.Expression != "" {
		w = w.WithMatchConditions(admissionv1ac.MatchCondition().WithName(podwebhook.ConditionName).WithExpression(f.Expression))
	}
	if f.Selector != nil {
		sel := metav1ac.LabelSelector()
		for _, r := range f.Selector.MatchExpressions {
			sel = sel.WithMatchExpressions(metav1ac.LabelSelectorRequirement().WithKey(r.Key).WithOperator(r.Operator).WithValues(r.Values...))
		}
		w = w.WithObjectSelector(sel)
	}
	cfg := admissionv1ac.MutatingWebhookConfiguration(configuration).WithWebhooks(w)
	if resourceVersion != "" {
		cfg = cfg.WithResourceVersion(resourceVersion)
	}
	if annotation != "" {
		cfg = cfg.WithAnnotations(map[string]string{AdmittedAnnotation: annotation})
	}
	return c.Apply(ctx, cfg, client.FieldOwner(FieldOwner), client.ForceOwnership)
}
