package migrate

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/testing/render"
)

// kruiseKind is one of OpenKruise's CRDs as its chart installs it.
type kruiseKind struct {
	group, version, kind, plural string
	namespaced                   bool
}

var (
	cloneSets      = kruiseKind{"apps.kruise.io", "v1alpha1", "CloneSet", "clonesets", true}
	pubs           = kruiseKind{"policy.kruise.io", "v1alpha1", "PodUnavailableBudget", "podunavailablebudgets", true}
	spreads        = kruiseKind{"apps.kruise.io", "v1alpha1", "WorkloadSpread", "workloadspreads", true}
	nodeImages     = kruiseKind{"apps.kruise.io", "v1alpha1", "NodeImage", "nodeimages", false}
	rollouts       = kruiseKind{"rollouts.kruise.io", "v1beta1", "Rollout", "rollouts", true}
	sidecarSetKind = kruiseKind{"apps.kruise.io", "v1beta1", "SidecarSet", "sidecarsets", false}
)

func (k kruiseKind) gvk() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: k.group, Version: k.version, Kind: k.kind}
}

// crd is k's CustomResourceDefinition, its version served as given, its conversion sidecarops'.
func (k kruiseKind) crd(served bool) client.Object {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"group":    k.group,
			"names":    map[string]any{"kind": k.kind, "plural": k.plural},
			"versions": []any{map[string]any{"name": k.version, "served": served, "storage": true}},
			"conversion": map[string]any{"strategy": "Webhook", "webhook": map[string]any{"clientConfig": map[string]any{
				"service": map[string]any{"namespace": "sidecarops-system", "name": "sidecarops-webhook"},
			}}},
		},
	}}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	u.SetName(k.plural + "." + k.group)
	return u
}

func (k kruiseKind) object(name string) client.Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(k.gvk())
	u.SetName(name)
	if k.namespaced {
		u.SetNamespace("games")
	}
	return u
}

// kruiseManager is OpenKruise's manager Deployment, running as ServiceAccount sa.
func kruiseManager(replicas int32, sa string) client.Object {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: KruiseNamespace, Name: KruiseManager}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(replicas),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{ServiceAccountName: sa}},
	}}
}

// kruiseWebhooks are OpenKruise's registrations: its pod webhook (unless PodWebhook=false dropped it)
// and its SidecarSet webhooks.
func kruiseWebhooks(podWebhook bool) []client.Object {
	rule := func(group, resource string) []admissionregv1.RuleWithOperations {
		return []admissionregv1.RuleWithOperations{{
			Operations: []admissionregv1.OperationType{admissionregv1.Create, admissionregv1.Update},
			Rule:       admissionregv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}},
		}}
	}
	m := &admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "kruise-mutating-webhook-configuration"}}
	if podWebhook {
		m.Webhooks = append(m.Webhooks, admissionregv1.MutatingWebhook{Name: "mpod.kb.io", Rules: rule("", "pods")})
	}
	m.Webhooks = append(m.Webhooks, admissionregv1.MutatingWebhook{Name: "msidecarset.kb.io", Rules: rule("apps.kruise.io", "sidecarsets")})
	v := &admissionregv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "kruise-validating-webhook-configuration"},
		Webhooks:   []admissionregv1.ValidatingWebhook{{Name: "vsidecarset.kb.io", Rules: rule("apps.kruise.io", "sidecarsets")}},
	}
	return []client.Object{m, v}
}

// fence is the component's validating binding (denying or not) and, if withPolicy, the policy it
// binds; with crd, its mutating binding and policy.
func fence(actions []admissionregv1.ValidationAction, withPolicy, crd bool) []client.Object {
	out := []client.Object{&admissionregv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: FenceBinding},
		Spec:       admissionregv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "fence", ValidationActions: actions},
	}}
	// As the component names OpenKruise's manager.
	manager := []admissionregv1.MatchCondition{
		{Name: "openkruise-manager", Expression: "request.userInfo.username == 'system:serviceaccount:kruise-system:kruise-manager'"},
		{Name: "something-else", Expression: "has(object.spec)"},
	}
	if withPolicy {
		out = append(out, &admissionregv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "fence"}, Spec: admissionregv1.ValidatingAdmissionPolicySpec{MatchConditions: manager}})
	}
	if crd {
		out = append(out,
			&admissionregv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: FenceCRDBinding}, Spec: admissionregv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "fence-crd"}},
			&admissionregv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "fence-crd"}, Spec: admissionregv1.MutatingAdmissionPolicySpec{MatchConditions: manager}})
	}
	return out
}

var deny = []admissionregv1.ValidationAction{admissionregv1.Deny}

func pod(name string, change func(*corev1.Pod)) client.Object {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "game"}}}}
	if change != nil {
		change(p)
	}
	return p
}

// fakeCluster serves objs, and every kind but those named in notServed.
func fakeCluster(t *testing.T, notServed []string, objs ...client.Object) client.Reader {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1beta1.AddToScheme(scheme))
	mapper := apimeta.NewDefaultRESTMapper(nil)
	for gvk := range scheme.AllKnownTypes() {
		mapper.Add(gvk, apimeta.RESTScopeNamespace)
	}
	mapper.Add(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, apimeta.RESTScopeRoot)
	for _, k := range []kruiseKind{cloneSets, pubs, spreads, nodeImages, rollouts, sidecarSetKind} {
		scope := apimeta.RESTScopeRoot
		if k.namespaced {
			scope = apimeta.RESTScopeNamespace
		}
		mapper.Add(k.gvk(), scope)
	}
	// The fake client finds every kind its scheme knows: an API server that does not serve one
	// answers as the real client's RESTMapper does.
	get := func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			return err
		}
		if slices.Contains(notServed, gvk.Kind) {
			return &apimeta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
		}
		return c.Get(ctx, key, obj, opts...)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{Get: get}).Build()
}

func TestMigratePath(t *testing.T) {
	kruise := func(podWebhook bool, replicas int32) []client.Object {
		return append(kruiseWebhooks(podWebhook), kruiseManager(replicas, "kruise-manager"))
	}
	all := func(groups ...[]client.Object) []client.Object {
		var out []client.Object
		for _, g := range groups {
			out = append(out, g...)
		}
		return out
	}
	crds := []client.Object{sidecarSetKind.crd(true), cloneSets.crd(true), pubs.crd(true), spreads.crd(true), nodeImages.crd(true), rollouts.crd(true)}
	inUse := []client.Object{cloneSets.object("web"), cloneSets.object("api")}

	tests := []struct {
		name      string
		objs      []client.Object
		notServed []string
		path      Path
		inUse     []string
		losses    []string
		// blockers and warnings are substrings of the findings' messages, in order.
		blockers, warnings []string
		// fixes are substrings of the fixes, all findings together.
		fixes []string
	}{
		{
			name:     "SidecarSet only, OpenKruise running: path A, stop it",
			objs:     all(crds, kruise(true, 2)),
			path:     PathA,
			blockers: []string{"OpenKruise's controller runs", "pod webhook mpod.kb.io", "SidecarSet webhook msidecarset.kb.io", "SidecarSet webhook vsidecarset.kb.io"},
			fixes:    []string{"scale deployment kruise-controller-manager --replicas=0", "kubectl delete mutatingwebhookconfiguration kruise-mutating-webhook-configuration   # path A"},
		},
		{
			name: "OpenKruise's own NodeImages and another project's Rollouts: path A",
			objs: all(crds, []client.Object{nodeImages.object("node-1"), rollouts.object("canary")}),
			path: PathA,
		},
		{
			name: "a CloneSet kind not served: path A",
			objs: all([]client.Object{sidecarSetKind.crd(true), cloneSets.crd(false)}, inUse),
			path: PathA,
		},
		{
			name:     "CloneSets, OpenKruise running, nothing done yet: path B, the fence and PodWebhook=false block",
			objs:     all(crds, inUse, kruise(true, 2)),
			path:     PathB,
			inUse:    []string{"CloneSet.apps.kruise.io: 2"},
			blockers: []string{"the fence is not installed (no ValidatingAdmissionPolicyBinding sidecarops-openkruise-fence; no MutatingAdmissionPolicyBinding sidecarops-openkruise-fence-crd)", "pod webhook mpod.kb.io"},
			// Served by the manager that keeps running: not blockers on path B.
			warnings: []string{"SidecarSet webhook msidecarset.kb.io", "SidecarSet webhook vsidecarset.kb.io"},
			fixes:    []string{"--set openkruise.fence.enabled=true", "config/samples/kruise-coexist", "--set featureGates='PodWebhook=false'"},
		},
		{
			name:     "CloneSets, fence installed, PodWebhook=false: path B, clear",
			objs:     all(crds, inUse, kruise(false, 2), fence(deny, true, true)),
			path:     PathB,
			inUse:    []string{"CloneSet.apps.kruise.io: 2"},
			warnings: []string{"SidecarSet webhook msidecarset.kb.io", "SidecarSet webhook vsidecarset.kb.io"},
		},
		{
			name:     "a fence naming another ServiceAccount than OpenKruise's manager's refuses it nothing",
			objs:     all(crds, inUse, kruiseWebhooks(false), []client.Object{kruiseManager(2, "")}, fence(deny, true, true)),
			path:     PathB,
			inUse:    []string{"CloneSet.apps.kruise.io: 2"},
			blockers: []string{"the fence does not name the user OpenKruise's manager runs as (system:serviceaccount:kruise-system:default)"},
			warnings: []string{"SidecarSet webhook msidecarset.kb.io", "SidecarSet webhook vsidecarset.kb.io"},
			fixes:    []string{"--set openkruise.fence.serviceAccount=kruise-system/default"},
		},
		{
			name:     "a fence binding that only warns does not fence",
			objs:     all(crds, inUse, kruise(false, 2), fence([]admissionregv1.ValidationAction{admissionregv1.Warn}, true, true)),
			path:     PathB,
			inUse:    []string{"CloneSet.apps.kruise.io: 2"},
			blockers: []string{"the fence is not installed (ValidatingAdmissionPolicyBinding sidecarops-openkruise-fence does not deny (validationActions [Warn]))"},
			warnings: []string{"SidecarSet webhook msidecarset.kb.io", "SidecarSet webhook vsidecarset.kb.io"},
		},
		{
			name:     "a fence without its CRD part does not fence: OpenKruise's manager would take the conversion back",
			objs:     all(crds, inUse, kruise(false, 2), fence(deny, true, false)),
			path:     PathB,
			inUse:    []string{"CloneSet.apps.kruise.io: 2"},
			blockers: []string{"the fence is not installed (no MutatingAdmissionPolicyBinding sidecarops-openkruise-fence-crd)"},
			warnings: []string{"SidecarSet webhook msidecarset.kb.io", "SidecarSet webhook vsidecarset.kb.io"},
		},
		{
			name:      "before Kubernetes 1.36 the fence has no CRD part: path B waits for 1.36",
			objs:      all(crds, inUse, kruise(false, 2), fence(deny, true, false)),
			notServed: []string{"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"},
			path:      PathB,
			inUse:     []string{"CloneSet.apps.kruise.io: 2"},
			blockers:  []string{"the API server serves no MutatingAdmissionPolicy"},
			warnings:  []string{"SidecarSet webhook msidecarset.kb.io", "SidecarSet webhook vsidecarset.kb.io"},
		},
		{
			name:      "no ValidatingAdmissionPolicy served: no fence",
			objs:      all(crds, inUse, kruise(false, 2)),
			notServed: []string{"ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicyBinding"},
			path:      PathB,
			inUse:     []string{"CloneSet.apps.kruise.io: 2"},
			blockers:  []string{"the API server serves no MutatingAdmissionPolicy", "the fence is not installed (the API server serves no ValidatingAdmissionPolicy)"},
			warnings:  []string{"SidecarSet webhook msidecarset.kb.io", "SidecarSet webhook vsidecarset.kb.io"},
		},
		{
			name:     "a fence binding without its policy does not fence",
			objs:     all(crds, inUse, kruise(false, 2), fence(deny, false, true)),
			path:     PathB,
			inUse:    []string{"CloneSet.apps.kruise.io: 2"},
			blockers: []string{"the fence is not installed (ValidatingAdmissionPolicyBinding sidecarops-openkruise-fence binds ValidatingAdmissionPolicy fence, which is missing)"},
			warnings: []string{"SidecarSet webhook msidecarset.kb.io", "SidecarSet webhook vsidecarset.kb.io"},
		},
		{
			name:     "path B with OpenKruise's manager stopped: nobody serves its SidecarSet webhooks",
			objs:     all(crds, inUse, kruise(false, 0)),
			path:     PathB,
			inUse:    []string{"CloneSet.apps.kruise.io: 2"},
			blockers: []string{"SidecarSet webhook msidecarset.kb.io", "SidecarSet webhook vsidecarset.kb.io"},
		},
		{
			name: "what goes with the pod webhook: budgets, spreads, gated and ordered pods",
			objs: all(crds, fence(deny, true, true), []client.Object{
				pubs.object("web"), spreads.object("zones"), spreads.object("racks"),
				pod("gated", func(p *corev1.Pod) {
					p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "KruisePodReady"}}
					p.Annotations = map[string]string{"apps.kruise.io/using-enhanced-liveness": "true"}
				}),
				pod("ordered", func(p *corev1.Pod) {
					p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "KRUISE_CONTAINER_PRIORITY", Value: "1"}}
				}),
				pod("plain", nil),
			}),
			path:  PathB,
			inUse: []string{"WorkloadSpread.apps.kruise.io: 2", "PodUnavailableBudget.policy.kruise.io: 1"},
			losses: []string{
				"2 WorkloadSpread(s) no longer spread new pods",
				"1 PodUnavailableBudget(s) no longer hold back pod deletions, evictions and in-place updates",
				"1 pod(s) carry the readiness gate KruisePodReady",
				"1 pod(s) use the enhanced liveness probe",
				"1 pod(s) start their containers in an order",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Check(context.Background(), fakeCluster(t, tt.notServed, tt.objs...), Options{})
			require.NoError(t, err)
			assert.Equal(t, tt.path, r.Path)
			var inUse []string
			for _, u := range r.InUse {
				inUse = append(inUse, u.String())
			}
			assert.Equal(t, tt.inUse, inUse)
			require.Len(t, r.Losses, len(tt.losses), "losses %q", r.Losses)
			for i, want := range tt.losses {
				assert.Contains(t, r.Losses[i], want)
			}
			var blockers, warnings []Finding
			var fixes []string
			for _, f := range r.Findings {
				fixes = append(fixes, f.Fix)
				if f.Blocker {
					blockers = append(blockers, f)
				} else {
					warnings = append(warnings, f)
				}
			}
			matches(t, "blockers", tt.blockers, blockers)
			matches(t, "warnings", tt.warnings, warnings)
			assert.Equal(t, len(tt.blockers) > 0, r.Blocked())
			for _, want := range tt.fixes {
				assert.Contains(t, strings.Join(fixes, "\n"), want)
			}
		})
	}
}

func matches(t *testing.T, what string, want []string, got []Finding) {
	t.Helper()
	var msgs []string
	for _, f := range got {
		msgs = append(msgs, f.Message)
	}
	if assert.Len(t, got, len(want), "%s: %q", what, msgs) {
		for i, w := range want {
			assert.Contains(t, msgs[i], w, what)
		}
	}
}

// TestMigrateFenceNames holds the bindings the check looks for to the ones the openkruise-fence
// component installs (the chart's are held to the component by test/manifests).
func TestMigrateFenceNames(t *testing.T) {
	raw, err := os.ReadFile("../../config/components/openkruise-fence/admission_policy.yaml")
	require.NoError(t, err)
	objs, err := render.Parse(raw)
	require.NoError(t, err)
	for _, key := range []string{
		"ValidatingAdmissionPolicyBinding/" + FenceBinding,
		"MutatingAdmissionPolicyBinding/" + FenceCRDBinding,
	} {
		assert.Contains(t, objs, key)
	}
}
