package installview

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	psaapi "k8s.io/pod-security-admission/api"
	"sigs.k8s.io/yaml"

	"github.com/sidecarops/sidecarops/internal/impact"
	"github.com/sidecarops/sidecarops/internal/podwebhook"
)

// View is which pods the API server sends the pod webhook (podwebhook.View), with the Namespaces'
// labels it is evaluated on.
type View struct {
	*podwebhook.View
	// source says where the view comes from, for the notice.
	source string
	// namespaceLabels are the labels of the Namespaces known: those of the input, which win (they
	// may be about to be applied), then (live) the cluster's as they are looked up.
	namespaceLabels map[string]map[string]string
	lookup          func(ctx context.Context, name string) (map[string]string, error)
	// notices receives the notice, once.
	notices io.Writer
	noticed bool
}

// Default is the pod webhook as config/default installs it.
func Default() (*View, error) {
	return viewOf("assuming the pod webhook as config/default installs it (--install-values or --kubeconfig give yours)",
		podwebhook.NamespaceSelector("", nil, nil), nil, nil)
}

func viewOf(source string, nsSel, objSel *metav1.LabelSelector, conditions []admissionregv1.MatchCondition) (*View, error) {
	v, err := podwebhook.New(nsSel, objSel, conditions)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return &View{View: v, source: source, namespaceLabels: map[string]map[string]string{}, notices: io.Discard}, nil
}

// chartValues are the values of the sidecarops chart that decide which pods the pod webhook sees.
// Older charts kept them under webhook: rather than webhookConfiguration:.
type chartValues struct {
	WebhookConfiguration *chartWebhookValues `json:"webhookConfiguration"`
	Webhook              *chartWebhookValues `json:"webhook"`
}

type chartWebhookValues struct {
	ExcludedNamespaces []string              `json:"excludedNamespaces"`
	NamespaceSelector  *metav1.LabelSelector `json:"namespaceSelector"`
	ObjectSelector     *metav1.LabelSelector `json:"objectSelector"`
}

// FromValues is the pod webhook the chart renders from the values file at path (--install-values),
// installed in the release namespace releaseNS (charts/sidecarops/templates/webhooks.yaml). Keys it
// does not read are ignored, and absent ones take the chart's defaults: none of these is required.
func FromValues(path, releaseNS string) (*View, error) {
	raw, err := os.ReadFile(path) //nolint:gosec // G304: the values file the user names with --install-values
	if err != nil {
		return nil, fmt.Errorf("--install-values: %w", err)
	}
	var vals chartValues
	if err := yaml.Unmarshal(raw, &vals); err != nil {
		return nil, fmt.Errorf("--install-values %s: %w", path, err)
	}
	wc := vals.WebhookConfiguration
	if wc == nil {
		wc = vals.Webhook
	}
	if wc == nil {
		wc = &chartWebhookValues{}
	}
	return viewOf("the pod webhook as the chart installs it with --install-values "+path+" in namespace "+releaseNS,
		podwebhook.NamespaceSelector(releaseNS, wc.ExcludedNamespaces, wc.NamespaceSelector), wc.ObjectSelector, nil)
}

// FromCluster reads the pod webhook's registration from the cluster c, and looks up there the
// Namespaces the input does not give. cluster names it in errors and the notice.
func FromCluster(ctx context.Context, c kubernetes.Interface, cluster string) (*View, error) {
	mwc, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, podwebhook.ConfigurationName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: reading the pod webhook: %w", cluster, err)
	}
	pv, err := podwebhook.FromConfiguration(mwc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cluster, err)
	}
	v := &View{View: pv, namespaceLabels: map[string]map[string]string{}, notices: io.Discard,
		source: "the pod webhook " + podwebhook.WebhookName + " of MutatingWebhookConfiguration " + podwebhook.ConfigurationName + " in the cluster of " + cluster}
	v.lookup = func(ctx context.Context, name string) (map[string]string, error) {
		ns, err := c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return ns.Labels, nil
	}
	return v, nil
}

// Known gives the Namespaces of the input, whose labels the namespace selector is evaluated on,
// and where the notice goes.
func (v *View) Known(namespaces []*corev1.Namespace, notices io.Writer) {
	for _, ns := range namespaces {
		v.namespaceLabels[ns.Name] = ns.Labels
	}
	v.notices = notices
}

// notice is said once: where the view comes from, which pods it keeps from the webhook, and what it
// cannot tell.
func (v *View) notice() string {
	var unseen []string
	for _, e := range v.Exclusions() {
		r := e.Requirement
		switch e.Reason {
		case podwebhook.ExcludedByName:
			unseen = append(unseen, "pods in namespaces "+strings.Join(r.ValuesUnsorted(), ", "))
		case podwebhook.ManagersOwn, podwebhook.ControlPlane:
			unseen = append(unseen, "in namespaces labelled "+r.Key())
		case podwebhook.OtherNamespaceRequirement:
			unseen = append(unseen, "in namespaces not matching "+r.String())
		default:
			unseen = append(unseen, "pods not matching "+r.String())
		}
	}
	msg := "note: " + v.source + ": not seen by the webhook: " + strings.Join(unseen, ", ")
	if len(unseen) == 0 {
		msg = "note: " + v.source + ": the webhook's selectors leave out no pod"
	}
	for _, c := range v.Unevaluated {
		msg += fmt.Sprintf("; match condition %s (%s) not evaluated offline: it may leave out pods said to be seen", c.Name, c.Expression)
	}
	return msg
}

// NoticeOnce writes the view's notice the first time it is called.
func (v *View) NoticeOnce() {
	if !v.noticed {
		v.noticed = true
		fmt.Fprintln(v.notices, v.notice())
	}
}

// Unseen says why the API server would never send the webhook the creation of pod in namespace ns,
// or "" when it would (as far as the selectors tell).
func (v *View) Unseen(ctx context.Context, ns string, pod *corev1.Pod) (string, error) {
	if why, err := v.NamespaceUnseen(ctx, ns); why != "" || err != nil {
		return why, err
	}
	if e := v.ObjectExcluded(pod.Labels); e != nil {
		return "not seen by the webhook: " + e.Why(ns), nil
	}
	return "", nil
}

// NamespaceUnseen says why the webhook sees no pod of namespace ns, or "". A Namespace neither in
// the input nor found in the cluster has the one label the API server gives every Namespace, its
// name.
func (v *View) NamespaceUnseen(ctx context.Context, ns string) (string, error) {
	nsLabels, err := v.labels(ctx, ns)
	if err != nil {
		return "", err
	}
	if e := v.NamespaceExcluded(ns, nsLabels); e != nil {
		return "not seen by the webhook: " + e.Why(ns), nil
	}
	return "", nil
}

// labels are the labels of the Namespace ns: the input's, else (live) the cluster's; none when
// neither has it.
func (v *View) labels(ctx context.Context, ns string) (map[string]string, error) {
	nsLabels, ok := v.namespaceLabels[ns]
	if !ok && v.lookup != nil {
		var err error
		switch nsLabels, err = v.lookup(ctx, ns); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading namespace %s: %w", ns, err)
		}
		v.namespaceLabels[ns] = nsLabels
	}
	return nsLabels, nil
}

// Enforced is the labels of namespace ns when they enforce a Pod Security level above privileged,
// the only namespaces where injection can make a pod fail it; nil elsewhere, and where the labels
// are not known (neither the input nor, live, the cluster has the Namespace).
func (v *View) Enforced(ctx context.Context, ns string) (map[string]string, error) {
	nsLabels, err := v.labels(ctx, ns)
	if err != nil || impact.Enforced(nsLabels).Level == psaapi.LevelPrivileged {
		return nil, err
	}
	return nsLabels, nil
}
