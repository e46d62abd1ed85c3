package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/podwebhook"
)

// installFlags say which installation's pod webhook the output accounts for: the API server never
// sends it a pod its namespace or object selector leaves out, so such a pod is created without
// sidecars whatever matches it.
type installFlags struct {
	values    string
	namespace string
	cluster   clusterFlags
}

func (f *installFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.values, "install-values", "", "values file of the sidecarops chart as installed (helm install -f FILE): its webhookConfiguration's excluded namespaces and selectors say which pods the pod webhook never sees")
	fs.StringVar(&f.namespace, "install-namespace", podwebhook.DefaultNamespace, "with --install-values, the release's namespace, which the pod webhook never sees")
	// Offline unless asked: $KUBECONFIG alone does not make these commands read a cluster.
	f.cluster.register(fs, "read the pod webhook's namespace and object selectors and match conditions from the cluster's MutatingWebhookConfiguration "+podwebhook.ConfigurationName+", and Namespaces' labels (read-only), with --kubeconfig or --context")
}

// podWebhookView is which pods the API server sends the pod webhook (podwebhook.View), with the
// Namespaces' labels it is evaluated on.
type podWebhookView struct {
	*podwebhook.View
	// source says where the view comes from, for the notice.
	source string
	// namespaceLabels are the labels of the Namespaces known: those of the input, which win (they
	// may be about to be applied), then (live) the cluster's as they are looked up.
	namespaceLabels map[string]map[string]string
	lookup          func(ctx context.Context, name string) (map[string]string, error)
	noticed         bool
}

// view reads the installation named by the flags; without any, the one config/default installs.
// namespaces are the Namespaces of the input, whose labels the namespace selector is evaluated on.
func (f *installFlags) view(ctx context.Context, namespaces []*corev1.Namespace) (*podWebhookView, error) {
	var (
		v   *podWebhookView
		err error
	)
	switch {
	case f.values != "" && f.cluster.given():
		return nil, usageError{errors.New("--install-values and --kubeconfig/--context: give one, not both")}
	case f.cluster.given():
		v, err = liveWebhookView(ctx, f.cluster)
	case f.values != "":
		v, err = valuesWebhookView(f.values, f.namespace)
	default:
		v, err = webhookViewOf("assuming the pod webhook as config/default installs it (--install-values or --kubeconfig give yours)",
			podwebhook.NamespaceSelector("", nil, nil), nil, nil)
	}
	if err != nil {
		return nil, err
	}
	v.namespaceLabels = map[string]map[string]string{}
	for _, ns := range namespaces {
		v.namespaceLabels[ns.Name] = ns.Labels
	}
	return v, nil
}

func webhookViewOf(source string, nsSel, objSel *metav1.LabelSelector, conditions []admissionregv1.MatchCondition) (*podWebhookView, error) {
	v, err := podwebhook.New(nsSel, objSel, conditions)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return &podWebhookView{View: v, source: source}, nil
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

// valuesWebhookView is the pod webhook the chart renders from the values file at path, installed in
// the release namespace releaseNS (charts/sidecarops/templates/webhooks.yaml). Keys it does not read
// are ignored, and absent ones take the chart's defaults: none of these is required.
func valuesWebhookView(path, releaseNS string) (*podWebhookView, error) {
	raw, err := os.ReadFile(path)
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
	return webhookViewOf("the pod webhook as the chart installs it with --install-values "+path+" in namespace "+releaseNS,
		podwebhook.NamespaceSelector(releaseNS, wc.ExcludedNamespaces, wc.NamespaceSelector), wc.ObjectSelector, nil)
}

// liveWebhookView reads the pod webhook's registration from the cluster, and looks up there the
// Namespaces the input does not give.
func liveWebhookView(ctx context.Context, cluster clusterFlags) (*podWebhookView, error) {
	cfg, err := cluster.restConfig()
	if err != nil {
		return nil, err
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cluster, err)
	}
	mwc, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, podwebhook.ConfigurationName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: reading the pod webhook: %w", cluster, err)
	}
	pv, err := podwebhook.FromConfiguration(mwc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cluster, err)
	}
	v := &podWebhookView{View: pv, source: "the pod webhook " + podwebhook.WebhookName + " of MutatingWebhookConfiguration " + podwebhook.ConfigurationName + " in the cluster of " + cluster.String()}
	v.lookup = func(ctx context.Context, name string) (map[string]string, error) {
		ns, err := c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return ns.Labels, nil
	}
	return v, nil
}

// notice is said once: where the view comes from, which pods it keeps from the webhook, and what it
// cannot tell.
func (v *podWebhookView) notice() string {
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

// unseen says why the API server would never send the webhook the creation of pod in namespace ns,
// or "" when it would (as far as the selectors tell).
func (v *podWebhookView) unseen(ctx context.Context, ns string, pod *corev1.Pod) (string, error) {
	if why, err := v.namespaceUnseen(ctx, ns); why != "" || err != nil {
		return why, err
	}
	if e := v.ObjectExcluded(pod.Labels); e != nil {
		return "not seen by the webhook: " + e.Why(ns), nil
	}
	return "", nil
}

// namespaceUnseen says why the webhook sees no pod of namespace ns, or "". A Namespace neither in
// the input nor found in the cluster has the one label the API server gives every Namespace, its
// name.
func (v *podWebhookView) namespaceUnseen(ctx context.Context, ns string) (string, error) {
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
func (v *podWebhookView) labels(ctx context.Context, ns string) (map[string]string, error) {
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

// noticeOnce writes the view's notice to the workspace's stderr the first time it is called.
func (v *podWebhookView) noticeOnce(w *workspace) {
	if !v.noticed {
		v.noticed = true
		fmt.Fprintln(w.stderr, v.notice())
	}
}

// warnUnseen warns, for check, of what the installation keeps from the webhook: a SidecarSet scoped
// by name to namespaces it never sees, and a workload a SidecarSet matches in a namespace or with
// labels it never sees (its pods are created without that SidecarSet's sidecars).
func (w *workspace) warnUnseen(ctx context.Context, v *podWebhookView, namespace string) error {
	for _, ss := range w.sidecarSets {
		names := namespacesByName(ss.Spec.NamespaceSelector)
		if len(names) == 0 {
			continue
		}
		var whys []string
		for _, ns := range names {
			why, err := v.namespaceUnseen(ctx, ns)
			if err != nil {
				return err
			}
			if why == "" {
				break
			}
			whys = append(whys, why)
		}
		if len(whys) == len(names) {
			v.noticeOnce(w)
			// Named as written: a v1alpha1 spec.namespace became this selector.
			at := w.written[ss].Errors(field.ErrorList{field.Forbidden(field.NewPath("spec", "namespaceSelector"), "")})[0].Field
			w.warnNotSeen(w.origin[ss].Report(at, "injects nothing: "+strings.Join(whys, "; ")))
		}
	}
	for _, o := range w.workloads {
		pod, _ := manifest.PodTemplate(o.Obj, namespace)
		why, err := v.unseen(ctx, pod.Namespace, pod)
		if err != nil {
			return err
		}
		if why == "" {
			continue
		}
		raw, err := json.Marshal(pod)
		if err != nil {
			return err
		}
		reasons, err := w.snapshot.Explain(ctx, pod.Namespace, raw)
		if err != nil {
			return err
		}
		var matching []string
		for name, r := range reasons {
			if slices.Equal(r, []string{"matches"}) {
				matching = append(matching, name)
			}
		}
		if len(matching) > 0 {
			slices.Sort(matching)
			v.noticeOnce(w)
			w.warnNotSeen(o.Report("", fmt.Sprintf("%s: created without the sidecars of %s, which match it", why, strings.Join(matching, ", "))))
		}
	}
	return nil
}

// namespacesByName are the namespaces a SidecarSet's namespaceSelector names when it selects by the
// name label alone (as spec.namespace converts), else none.
func namespacesByName(sel *metav1.LabelSelector) []string {
	switch {
	case sel == nil:
		return nil
	case len(sel.MatchLabels) == 1 && len(sel.MatchExpressions) == 0:
		if ns, ok := sel.MatchLabels[v1beta1.NamespaceNameLabel]; ok {
			return []string{ns}
		}
	case len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 1:
		if e := sel.MatchExpressions[0]; e.Key == v1beta1.NamespaceNameLabel && e.Operator == metav1.LabelSelectorOpIn {
			return e.Values
		}
	}
	return nil
}
