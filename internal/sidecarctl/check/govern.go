package check

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/impact"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/findings"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/workspace"
)

// ClusterState is what check reads of the cluster (--kubeconfig, --context) for the SidecarSet
// policies: its Namespaces, a census of its unfinished pods, and its SidecarSets, which the input's
// of the same name replace.
type ClusterState struct {
	namespaces  []*corev1.Namespace
	pods        *impact.Census
	sidecarSets map[string]*v1beta1.SidecarSet
}

// podPage bounds one list of pods: a cluster's may be too many for one answer.
const podPage = 500

// ReadCluster lists the Namespaces, pods and SidecarSets (in v1beta1, as stored) of the cluster of
// cfg, which f names in errors. A cluster without the SidecarSet kind holds none.
func ReadCluster(ctx context.Context, cfg *rest.Config, f string) (*ClusterState, error) {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f, err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f, err)
	}
	st := &ClusterState{pods: impact.NewCensus(), sidecarSets: map[string]*v1beta1.SidecarSet{}}
	nss, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: listing namespaces: %w", f, err)
	}
	for i := range nss.Items {
		st.namespaces = append(st.namespaces, &nss.Items[i])
	}
	sets, err := dc.Resource(v1beta1.GroupVersion.WithResource("sidecarsets")).List(ctx, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s: listing SidecarSets: %w", f, err)
	}
	if sets != nil {
		for _, u := range sets.Items {
			ss := new(v1beta1.SidecarSet)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ss); err != nil {
				return nil, fmt.Errorf("%s: SidecarSet %s: %w", f, u.GetName(), err)
			}
			st.sidecarSets[ss.Name] = ss
		}
	}
	for opts := (metav1.ListOptions{Limit: podPage}); ; {
		pods, err := c.CoreV1().Pods("").List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: listing pods: %w", f, err)
		}
		for i := range pods.Items {
			st.pods.OnAdd(&pods.Items[i], true)
		}
		if opts.Continue = pods.Continue; opts.Continue == "" {
			return st, nil
		}
	}
}

// Reviewer puts SidecarSets to the SidecarSet policies as admission would: who asks, the
// namespaces and pods the impact view is computed over, and the stored objects an UPDATE replaces.
type Reviewer struct {
	user       authenticationv1.UserInfo
	namespaces []*corev1.Namespace
	pods       impact.Pods
	stored     map[string]*v1beta1.SidecarSet
}

// NewReviewer asks as user, over the input's Namespaces and workloads (their namespace, when they
// name none) and, when cluster is not nil, the cluster's. A Namespace of the input wins over the
// cluster's (it may be about to be applied), and a namespace that a workload uses but neither
// describes has its name label only, as the API server gives every Namespace. The input's workloads
// count their replicas beside the cluster's pods, whose they may already be.
func NewReviewer(w *workspace.Workspace, u authenticationv1.UserInfo, namespace string, cluster *ClusterState) *Reviewer {
	r := &Reviewer{user: u}
	seen := map[string]bool{}
	add := func(nss ...*corev1.Namespace) {
		for _, ns := range nss {
			if !seen[ns.Name] {
				seen[ns.Name] = true
				r.namespaces = append(r.namespaces, ns)
			}
		}
	}
	add(w.Namespaces...)
	var sources podSources
	if cluster != nil {
		add(cluster.namespaces...)
		sources = append(sources, cluster.pods)
		r.stored = cluster.sidecarSets
	}
	var input impact.Static
	for _, o := range w.Workloads {
		pod, ok := manifest.PodTemplate(o.Obj, namespace)
		if !ok {
			continue
		}
		add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pod.Namespace}})
		input = append(input, impact.Replicas{Namespace: pod.Namespace, Labels: pod.Labels, Count: replicas(o.Obj)})
	}
	r.pods = append(sources, input)
	return r
}

// podSources counts the pods of every source together.
type podSources []impact.Pods

// Count implements impact.Pods.
func (s podSources) Count(namespace string, selector labels.Selector) int {
	n := 0
	for _, p := range s {
		n += p.Count(namespace, selector)
	}
	return n
}

// replicas is how many pods a workload runs as written: its spec.replicas, 1 when it is left out
// (the API server's default); 1 for a kind without one, a Pod, and a DaemonSet or a Job, whose
// count the input does not tell.
func replicas(obj runtime.Object) int {
	doc, ok := obj.(*unstructured.Unstructured)
	if !ok {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return 1
		}
		doc = &unstructured.Unstructured{Object: m}
	}
	n, found, err := unstructured.NestedInt64(doc.Object, "spec", "replicas")
	if err != nil || !found || n < 0 {
		return 1
	}
	return int(n)
}

// governance is what the SidecarSet policies say of every SidecarSet that decoded, through the
// path admission takes (injector.GovernSidecarSet): CREATE, or UPDATE of the cluster's object of
// its name. A SidecarSet OpenKruise's rules refuse is asked too, so that one run says every
// problem; admission would refuse it before asking. Deny findings are errors a cluster refuses;
// warn findings and Pod Security's warnings have the severity advice; dryrun findings are notices.
func governance(ctx context.Context, w *workspace.Workspace, r *Reviewer, advice string) ([]findings.Finding, error) {
	var out []findings.Finding
	for _, ss := range w.Decoded {
		review := engine.Review{Operation: string(admissionv1.Create), UserInfo: engine.NewUserInfo(r.user), SidecarSet: ss}
		if old, ok := r.stored[ss.Name]; ok {
			review.Operation, review.OldSidecarSet = string(admissionv1.Update), old
		}
		view, err := impact.Of(ss, r.namespaces, r.pods)
		if err != nil {
			continue // an invalid selector, which OpenKruise's rules refuse: reported
		}
		review.Impact = view
		gov, err := injector.GovernSidecarSet(ctx, w.Snapshot, review)
		if err != nil {
			return nil, err
		}
		o := w.Origin[ss]
		var fs []findings.Finding
		for _, set := range []struct {
			findings []engine.Finding
			severity string
		}{{gov.Deny, findings.SeverityError}, {gov.Warn, advice}, {gov.DryRun, findings.SeverityNotice}} {
			for _, f := range set.findings {
				rule := findings.PolicyRule(f.Rule)
				if rule == findings.RuleSelectorMatchesNothing && !holdsPods(view, r.pods) {
					continue
				}
				fs = append(fs, findings.Finding{Error: o.Report(f.Field, f.Message), Severity: set.severity, Rule: rule,
					Refusal: f.Action == engine.ActionDeny})
			}
		}
		for _, msg := range gov.PodSecurity {
			fs = append(fs, findings.Finding{Error: o.Report("", msg), Severity: advice, Rule: findings.RulePodSecurity})
		}
		// Read down the document, as the other findings of its lines are; admission's order
		// (denials first, then by rule) among those of one line.
		slices.SortStableFunc(fs, func(a, b findings.Finding) int { return cmp.Compare(a.Line, b.Line) })
		out = append(out, fs...)
	}
	return out, nil
}

// holdsPods reports whether pods has any pod in the namespaces of view: only then does a selector
// that selects none of them say something of the SidecarSet rather than of what the input leaves
// out (docs/cli.md, strict/selector-matches-nothing).
func holdsPods(view *impact.View, pods impact.Pods) bool {
	for ns := range view.Namespaces {
		if pods.Count(ns, labels.Everything()) > 0 {
			return true
		}
	}
	return false
}
