package podwebhook

import (
	"fmt"
	"slices"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// The pod webhook's registration as config/webhook and the chart name it: the one definition, which
// the manager (WebhookConfigurationName, PodWebhookName) and sidecarctl share.
const (
	ConfigurationName = "sidecarops"
	WebhookName       = "mpod.sidecarops.io"
	// ControlPlaneLabel marks the manager's own Namespace in config/default; the pod webhook's
	// namespaceSelector leaves it out wherever kustomize installs it.
	ControlPlaneLabel = "sidecarops.io/control-plane"
	// KruiseControlPlaneLabel is the label OpenKruise's pod webhook leaves out namespaces by (its
	// own, and any a cluster's administrator labels so); sidecarops' leaves them out too.
	KruiseControlPlaneLabel = "control-plane"
	// DefaultNamespace is where config/default and the documented `helm install` put the manager.
	DefaultNamespace = "sidecarops-system"
	// ConditionName names the match condition the manager keeps on the pod webhook
	// (webhook/prefilter).
	ConditionName = "sidecarops-may-inject"
)

// NamespaceSelector is the pod webhook's namespaceSelector as the chart renders it
// (charts/sidecarops/templates/webhooks.yaml) in release namespace releaseNS: never the release
// namespace nor webhookConfiguration.excludedNamespaces by name, nor a namespace labelled as the
// manager's or as a control plane; extra (webhookConfiguration.namespaceSelector) narrows it further.
// With no releaseNS and nothing excluded it is config/webhook's, which leaves out the manager's
// namespace by its label alone.
func NamespaceSelector(releaseNS string, excluded []string, extra *metav1.LabelSelector) *metav1.LabelSelector {
	var names []string
	for _, ns := range append([]string{releaseNS}, excluded...) {
		if ns != "" && !slices.Contains(names, ns) {
			names = append(names, ns)
		}
	}
	sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: ControlPlaneLabel, Operator: metav1.LabelSelectorOpDoesNotExist},
		{Key: KruiseControlPlaneLabel, Operator: metav1.LabelSelectorOpDoesNotExist},
	}}
	if len(names) > 0 {
		sel.MatchExpressions = append([]metav1.LabelSelectorRequirement{{Key: v1beta1.NamespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: names}}, sel.MatchExpressions...)
	}
	if extra != nil {
		sel.MatchLabels = extra.MatchLabels
		sel.MatchExpressions = append(sel.MatchExpressions, extra.MatchExpressions...)
	}
	return sel
}

// View is which pods the API server sends the pod webhook.
type View struct {
	Namespaces labels.Selector
	Objects    labels.Selector
	// Unevaluated are the match conditions that may leave out pods the selectors let through. The
	// prefilter's is not among them: it lets through every pod some SidecarSet of the cluster may
	// inject into, and the manager widens it when a SidecarSet is admitted, so what it leaves out is
	// what no SidecarSet selects.
	Unevaluated []admissionregv1.MatchCondition
}

// New is the view of a webhook registered with these selectors (nil: the API server's default, {},
// every namespace or pod) and match conditions.
func New(nsSel, objSel *metav1.LabelSelector, conditions []admissionregv1.MatchCondition) (*View, error) {
	v := &View{Namespaces: labels.Everything(), Objects: labels.Everything()}
	var err error
	if nsSel != nil {
		if v.Namespaces, err = metav1.LabelSelectorAsSelector(nsSel); err != nil {
			return nil, fmt.Errorf("namespaceSelector: %w", err)
		}
	}
	if objSel != nil {
		if v.Objects, err = metav1.LabelSelectorAsSelector(objSel); err != nil {
			return nil, fmt.Errorf("objectSelector: %w", err)
		}
	}
	for _, c := range conditions {
		if c.Name != ConditionName {
			v.Unevaluated = append(v.Unevaluated, c)
		}
	}
	return v, nil
}

// Default is the view of the pod webhook as installed with the chart's defaults in namespace ns.
func Default(ns string) (*View, error) {
	return New(NamespaceSelector(ns, nil, nil), nil, nil)
}

// FromConfiguration is the view of the pod webhook registered in cfg (the MutatingWebhookConfiguration
// sidecarops), or an error naming what is missing.
func FromConfiguration(cfg *admissionregv1.MutatingWebhookConfiguration) (*View, error) {
	i := slices.IndexFunc(cfg.Webhooks, func(w admissionregv1.MutatingWebhook) bool { return w.Name == WebhookName })
	if i < 0 {
		return nil, fmt.Errorf("MutatingWebhookConfiguration %s has no webhook %s", cfg.Name, WebhookName)
	}
	w := cfg.Webhooks[i]
	v, err := New(w.NamespaceSelector, w.ObjectSelector, w.MatchConditions)
	if err != nil {
		return nil, fmt.Errorf("MutatingWebhookConfiguration %s, webhook %s: %w", cfg.Name, WebhookName, err)
	}
	return v, nil
}

// Reason is the kind of requirement a pod fails to reach the webhook.
type Reason int

const (
	// ExcludedByName is a namespace named in the namespaceSelector's NotIn on the name label.
	ExcludedByName Reason = iota
	// ManagersOwn is a namespace carrying ControlPlaneLabel.
	ManagersOwn
	// ControlPlane is a namespace carrying KruiseControlPlaneLabel.
	ControlPlane
	// OtherNamespaceRequirement is a namespace failing another requirement of the namespaceSelector.
	OtherNamespaceRequirement
	// ObjectRequirement is a pod failing a requirement of the objectSelector.
	ObjectRequirement
)

// Exclusion is one requirement of the webhook's selectors, and what kind it is.
type Exclusion struct {
	Reason      Reason
	Requirement labels.Requirement
}

func namespaceExclusion(r labels.Requirement) Exclusion {
	switch {
	case r.Key() == v1beta1.NamespaceNameLabel && r.Operator() == selection.NotIn:
		return Exclusion{ExcludedByName, r}
	case r.Key() == ControlPlaneLabel && r.Operator() == selection.DoesNotExist:
		return Exclusion{ManagersOwn, r}
	case r.Key() == KruiseControlPlaneLabel && r.Operator() == selection.DoesNotExist:
		return Exclusion{ControlPlane, r}
	}
	return Exclusion{OtherNamespaceRequirement, r}
}

// Exclusions are every requirement of the selectors, the namespaceSelector's first.
func (v *View) Exclusions() []Exclusion {
	var out []Exclusion
	reqs, _ := v.Namespaces.Requirements()
	for _, r := range reqs {
		out = append(out, namespaceExclusion(r))
	}
	reqs, _ = v.Objects.Requirements()
	for _, r := range reqs {
		out = append(out, Exclusion{ObjectRequirement, r})
	}
	return out
}

// NamespaceExcluded is the first requirement of the namespaceSelector that namespace ns, with
// nsLabels, fails; nil when the webhook sees its pods (as far as the objectSelector lets it). The API
// server gives every Namespace its name label, which nsLabels need not hold.
func (v *View) NamespaceExcluded(ns string, nsLabels map[string]string) *Exclusion {
	set := labels.Set{v1beta1.NamespaceNameLabel: ns}
	for k, val := range nsLabels {
		set[k] = val
	}
	reqs, _ := v.Namespaces.Requirements()
	for _, r := range reqs {
		if !r.Matches(set) {
			e := namespaceExclusion(r)
			return &e
		}
	}
	return nil
}

// ObjectExcluded is the first requirement of the objectSelector that a pod with podLabels fails, or
// nil.
func (v *View) ObjectExcluded(podLabels map[string]string) *Exclusion {
	reqs, _ := v.Objects.Requirements()
	for _, r := range reqs {
		if !r.Matches(labels.Set(podLabels)) {
			return &Exclusion{ObjectRequirement, r}
		}
	}
	return nil
}

// Why says why the webhook sees no pod of namespace ns (or, for ObjectRequirement, not the pod).
func (e Exclusion) Why(ns string) string {
	switch e.Reason {
	case ExcludedByName:
		return fmt.Sprintf("namespace %s is excluded", ns)
	case ManagersOwn:
		return fmt.Sprintf("namespace %s is labelled %s, the manager's own", ns, ControlPlaneLabel)
	case ControlPlane:
		return fmt.Sprintf("namespace %s is labelled %s, a control plane's", ns, KruiseControlPlaneLabel)
	case OtherNamespaceRequirement:
		return fmt.Sprintf("namespace %s does not match its namespaceSelector (%s)", ns, e.Requirement.String())
	}
	return fmt.Sprintf("the pod does not match its objectSelector (%s)", e.Requirement.String())
}
