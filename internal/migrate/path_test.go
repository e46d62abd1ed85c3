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

// fence is the component's binding (denying or not) and, if withPolicy, the policy it binds.
func fence(actions []admissionregv1.ValidationAction, withPolicy bool) []client.Object {
	out := []client.Object{&admissionregv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: FenceBinding},
		Spec:       admissionregv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "fence", ValidationActions: actions},
	}}
	if withPolicy {
		// As the component names OpenKruise's manager.
		out = append(out, &admissionregv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "fence"}, Spec: admissionregv1.ValidatingAdmissionPolicySpec{MatchConditions: []admissionregv1.MatchCondition{
			{Name: "openkruise-manager", Expression: "request.userInfo.username == 'system:serviceaccount:kruise-system:kruise-manager'"},
			{Name: "something-else", Expression: "has(object.spec)"},
		}}})
	}
	return out
}

// sidecaropsManager is sidecarops' manager Deployment in sidecarops-system, run with args.
func sidecaropsManager(args ...string) client.Object {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "sidecarops-system", Name: Manager}, Spec: appsv1.DeploymentSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "kube-rbac-proxy"},
			{Name: "manager", Command: []string{"/manager"}, Args: args},
		}}},
	}}
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
	// The fake client cannot list the metadata of a kind its scheme does not know (OpenKruise's);
	// the API server can: the objects are listed whole, their metadata kept.
	list := func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		meta, ok := list.(*metav1.PartialObjectMetadataList)
		if !ok || scheme.Recognizes(meta.GroupVersionKind()) {
			return c.List(ctx, list, opts...)
		}
		whole := &unstructured.UnstructuredList{}
		whole.SetGroupVersionKind(meta.GroupVersionKind())
		if err := c.List(ctx, whole, opts...); err != nil {
			return err
		}
		meta.Items = nil
		for _, u := range whole.Items {
			meta.Items = append(meta.Items, metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: u.GetAPIVersion(), Kind: u.GetKind()}, ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace()}})
		}
		meta.Continue = whole.GetContinue()
		return nil
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{Get: get, List: list}).Build()
}

// all joins groups of objects.
func all(groups ...[]client.Object) []client.Object {
	var out []client.Object
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func kruise(podWebhook bool, replicas int32) []client.Object {
	return append(kruiseWebhooks(podWebhook), kruiseManager(replicas, "kruise-manager"))
}

var crds = []client.Object{sidecarSetKind.crd(true), cloneSets.crd(true), pubs.crd(true), spreads.crd(true), nodeImages.crd(true), rollouts.crd(true)}

// outcome is what a test expects of a report: substrings of its blockers' and warnings' messages, in
// order, and of its fixes, all findings together.
type outcome struct {
	blockers, warnings, fixes []string
}

func (want outcome) check(t *testing.T, r Report) {
	t.Helper()
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
	matches(t, "blockers", want.blockers, blockers)
	matches(t, "warnings", want.warnings, warnings)
	assert.Equal(t, len(want.blockers) > 0, r.Blocked())
	for _, w := range want.fixes {
		assert.Contains(t, strings.Join(fixes, "\n"), w)
	}
}

func check(t *testing.T, notServed []string, objs ...client.Object) Report {
	t.Helper()
	r, err := Check(context.Background(), fakeCluster(t, notServed, objs...), Options{})
	require.NoError(t, err)
	return r
}

func TestMigratePath(t *testing.T) {
	inUse := []client.Object{cloneSets.object("web"), cloneSets.object("api")}
	cloneSetsInUse := []string{"CloneSet.apps.kruise.io: 2"}
	// On path B with OpenKruise's manager running, its SidecarSet webhooks are served: warnings,
	// which sidecarops' manager clears with --openkruise-kept.
	sidecarSetWebhooks := []string{"SidecarSet webhook msidecarset.kb.io", "SidecarSet webhook vsidecarset.kb.io"}

	tests := []struct {
		name      string
		objs      []client.Object
		notServed []string
		path      Path
		inUse     []string
		// kept is the pod webhook path B keeps ("" for none).
		kept string
		outcome
	}{
		{
			name: "SidecarSet only, OpenKruise running: path A, stop it",
			objs: all(crds, kruise(true, 2)),
			path: PathA,
			outcome: outcome{
				blockers: []string{"OpenKruise's controller runs", "pod webhook mpod.kb.io", "SidecarSet webhook msidecarset.kb.io", "SidecarSet webhook vsidecarset.kb.io"},
				fixes:    []string{"scale deployment kruise-controller-manager --replicas=0", "kubectl delete mutatingwebhookconfiguration kruise-mutating-webhook-configuration   # path A"},
			},
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
			name:  "CloneSets, OpenKruise running, nothing done yet: path B, the fence blocks; its pod webhook is kept",
			objs:  all(crds, inUse, kruise(true, 2)),
			path:  PathB,
			inUse: cloneSetsInUse,
			kept:  "mpod.kb.io (MutatingWebhookConfiguration kruise-mutating-webhook-configuration)",
			outcome: outcome{
				blockers: []string{"the fence is not installed (no ValidatingAdmissionPolicyBinding sidecarops-openkruise-fence)"},
				warnings: sidecarSetWebhooks,
				fixes:    []string{"--set openkruise.fence.enabled=true", "config/samples/kruise-coexist"},
			},
		},
		{
			name:    "CloneSets, fence installed, OpenKruise's pod webhook on: path B, clear",
			objs:    all(crds, inUse, kruise(true, 2), fence(deny, true)),
			path:    PathB,
			inUse:   cloneSetsInUse,
			kept:    "mpod.kb.io (MutatingWebhookConfiguration kruise-mutating-webhook-configuration)",
			outcome: outcome{warnings: sidecarSetWebhooks, fixes: []string{"helm upgrade sidecarops CHART -n sidecarops-system --reuse-values --set openkruise.fence.enabled=true"}},
		},
		{
			name:    "path B, OpenKruise's pod webhook off (PodWebhook=false) and nothing relying on it: nothing lost",
			objs:    all(crds, inUse, kruise(false, 2), fence(deny, true)),
			path:    PathB,
			inUse:   cloneSetsInUse,
			outcome: outcome{warnings: sidecarSetWebhooks},
		},
		{
			name:  "path B, sidecarops' manager installed without --openkruise-kept: it would not take back OpenKruise's injection",
			objs:  all(crds, inUse, kruise(true, 2), fence(deny, true), []client.Object{sidecaropsManager("--leader-elect")}),
			path:  PathB,
			inUse: cloneSetsInUse,
			kept:  "mpod.kb.io (MutatingWebhookConfiguration kruise-mutating-webhook-configuration)",
			outcome: outcome{
				blockers: []string{"sidecarops' manager (Deployment sidecarops-system/sidecarops-manager) runs without --openkruise-kept"},
				warnings: sidecarSetWebhooks,
				fixes:    []string{"add --openkruise-kept to the manager's args"},
			},
		},
		{
			name:    "path B, sidecarops' manager with --openkruise-kept: OpenKruise's SidecarSet webhooks go by themselves",
			objs:    all(crds, inUse, kruise(true, 2), fence(deny, true), []client.Object{sidecaropsManager("--leader-elect", "--openkruise-kept")}),
			path:    PathB,
			inUse:   cloneSetsInUse,
			kept:    "mpod.kb.io (MutatingWebhookConfiguration kruise-mutating-webhook-configuration)",
			outcome: outcome{warnings: sidecarSetWebhooks, fixes: []string{"none: sidecarops' manager (Deployment sidecarops-system/sidecarops-manager) runs with --openkruise-kept and removes it"}},
		},
		{
			name:  "a fence naming another ServiceAccount than OpenKruise's manager's refuses it nothing",
			objs:  all(crds, inUse, kruiseWebhooks(true), []client.Object{kruiseManager(2, "")}, fence(deny, true)),
			path:  PathB,
			inUse: cloneSetsInUse,
			kept:  "mpod.kb.io (MutatingWebhookConfiguration kruise-mutating-webhook-configuration)",
			outcome: outcome{
				blockers: []string{"the fence does not name the user OpenKruise's manager runs as (system:serviceaccount:kruise-system:default)"},
				warnings: sidecarSetWebhooks,
				fixes:    []string{"--set openkruise.fence.serviceAccount=kruise-system/default"},
			},
		},
		{
			name:  "a fence binding that only warns does not fence",
			objs:  all(crds, inUse, kruise(true, 2), fence([]admissionregv1.ValidationAction{admissionregv1.Warn}, true)),
			path:  PathB,
			inUse: cloneSetsInUse,
			kept:  "mpod.kb.io (MutatingWebhookConfiguration kruise-mutating-webhook-configuration)",
			outcome: outcome{
				blockers: []string{"the fence is not installed (ValidatingAdmissionPolicyBinding sidecarops-openkruise-fence does not deny (validationActions [Warn]))"},
				warnings: sidecarSetWebhooks,
			},
		},
		{
			name:      "no ValidatingAdmissionPolicy served (before Kubernetes 1.30): no fence",
			objs:      all(crds, inUse, kruise(true, 2)),
			notServed: []string{"ValidatingAdmissionPolicyBinding"},
			path:      PathB,
			inUse:     cloneSetsInUse,
			kept:      "mpod.kb.io (MutatingWebhookConfiguration kruise-mutating-webhook-configuration)",
			outcome: outcome{
				blockers: []string{"the fence is not installed (the API server serves no ValidatingAdmissionPolicy (Kubernetes 1.30 or later does))"},
				warnings: sidecarSetWebhooks,
			},
		},
		{
			name:  "a fence binding without its policy does not fence",
			objs:  all(crds, inUse, kruise(true, 2), fence(deny, false)),
			path:  PathB,
			inUse: cloneSetsInUse,
			kept:  "mpod.kb.io (MutatingWebhookConfiguration kruise-mutating-webhook-configuration)",
			outcome: outcome{
				blockers: []string{"the fence is not installed (ValidatingAdmissionPolicyBinding sidecarops-openkruise-fence binds ValidatingAdmissionPolicy fence, which is missing)"},
				warnings: sidecarSetWebhooks,
			},
		},
		{
			name:  "path B with OpenKruise's manager stopped: nobody serves its webhooks",
			objs:  all(crds, inUse, kruise(true, 0)),
			path:  PathB,
			inUse: cloneSetsInUse,
			kept:  "mpod.kb.io (MutatingWebhookConfiguration kruise-mutating-webhook-configuration)",
			outcome: outcome{
				blockers: []string{"OpenKruise's pod webhook mpod.kb.io (MutatingWebhookConfiguration kruise-mutating-webhook-configuration) is registered and no OpenKruise manager serves it", "SidecarSet webhook msidecarset.kb.io", "SidecarSet webhook vsidecarset.kb.io"},
				fixes:    []string{"scale deployment kruise-controller-manager --replicas=1"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := check(t, tt.notServed, tt.objs...)
			assert.Equal(t, tt.path, r.Path)
			var inUse []string
			for _, u := range r.InUse {
				inUse = append(inUse, u.String())
			}
			assert.Equal(t, tt.inUse, inUse)
			assert.Equal(t, tt.kept != "", r.Kept())
			if tt.path == PathB {
				assert.Equal(t, tt.kept, r.KruisePodWebhook)
			}
			tt.check(t, r)
		})
	}
}

// TestMigrateConversion: the CRD's conversion through OpenKruise's Service is what path B keeps
// (OpenKruise's manager owns it), and blocks path A, where nothing serves it once OpenKruise stops.
func TestMigrateConversion(t *testing.T) {
	kruiseCRD := sidecarSetKind.crd(true).(*unstructured.Unstructured)
	require.NoError(t, unstructured.SetNestedMap(kruiseCRD.Object, map[string]any{"namespace": "kruise-system", "name": "kruise-webhook-service"}, "spec", "conversion", "webhook", "clientConfig", "service"))
	others := []client.Object{cloneSets.crd(true)}

	r := check(t, nil, all([]client.Object{kruiseCRD}, others)...)
	assert.Equal(t, PathA, r.Path)
	outcome{blockers: []string{"the SidecarSet CRD converts versions through Service kruise-system/kruise-webhook-service"}, fixes: []string{"-k config/crd"}}.check(t, r)

	r = check(t, nil, all([]client.Object{kruiseCRD}, others, []client.Object{cloneSets.object("web")}, fence(deny, true))...)
	assert.Equal(t, PathB, r.Path)
	outcome{}.check(t, r)
	assert.Contains(t, r.Found, "CustomResourceDefinition sidecarsets.apps.kruise.io: served v1beta1, stored v1beta1, conversion by Service kruise-system/kruise-webhook-service, OpenKruise's, kept on path B")
}

// TestMigrateInventory: what OpenKruise's pod webhook does for the objects and pods here, kept on
// path B while it is registered, lost where it is not; and a pod that relies on it makes the path B
// even with no other OpenKruise object.
func TestMigrateInventory(t *testing.T) {
	users := []client.Object{
		pubs.object("web"), spreads.object("zones"), spreads.object("racks"),
		pod("gated", func(p *corev1.Pod) {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "KruisePodReady"}}
			p.Annotations = map[string]string{"apps.kruise.io/using-enhanced-liveness": "true"}
		}),
		pod("by-env", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "KRUISE_CONTAINER_PRIORITY", Value: "1"}}
		}),
		pod("by-annotation", func(p *corev1.Pod) {
			p.Annotations = map[string]string{"apps.kruise.io/container-launch-priority": "Ordered"}
		}),
		pod("plain", func(p *corev1.Pod) {
			p.Annotations = map[string]string{"apps.kruise.io/using-enhanced-liveness": "false"}
		}),
	}
	features := []string{
		"2 WorkloadSpread(s): new pods spread over their subsets",
		"1 PodUnavailableBudget(s): pod deletions, evictions and in-place updates held back",
		"2 pod(s) with a container launch order (apps.kruise.io/container-launch-priority or env KRUISE_CONTAINER_PRIORITY)",
		"1 pod(s) with the readiness gate KruisePodReady",
		"1 pod(s) with the enhanced liveness probe (apps.kruise.io/using-enhanced-liveness)",
	}
	for _, tc := range []struct {
		name       string
		podWebhook bool
		outcome
	}{
		{"kept with OpenKruise's pod webhook", true, outcome{}},
		{"lost without it", false, outcome{warnings: []string{"OpenKruise's pod webhook is not registered (PodWebhook=false in its manager's feature gates, or OpenKruise not running)"}, fixes: []string{"without PodWebhook=false"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := check(t, nil, all(crds, fence(deny, true), kruise(tc.podWebhook, 1), users)...)
			assert.Equal(t, PathB, r.Path)
			assert.Equal(t, tc.podWebhook, r.Kept())
			require.Len(t, r.Features, len(features), "%q", r.Features)
			for i, want := range features {
				assert.Contains(t, r.Features[i].String(), want)
			}
			tc.warnings = append([]string{"SidecarSet webhook msidecarset.kb.io", "SidecarSet webhook vsidecarset.kb.io"}, tc.warnings...)
			tc.check(t, r)
		})
	}

	// Only a pod with a launch order, no OpenKruise object besides: path A would lose it, so path B.
	ordered := users[4]
	r := check(t, nil, all(crds, kruise(true, 1), []client.Object{ordered})...)
	assert.Equal(t, PathB, r.Path)
	assert.Empty(t, r.InUse)
	assert.True(t, r.Kept())
	require.Len(t, r.Features, 1)
	assert.Contains(t, r.Features[0].String(), "1 pod(s) with a container launch order")
	outcome{blockers: []string{"the fence is not installed"}, warnings: []string{"SidecarSet webhook msidecarset.kb.io", "SidecarSet webhook vsidecarset.kb.io"}}.check(t, r)
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

// TestMigrateFenceNames holds the binding the check looks for to the one the openkruise-fence
// component installs (the chart's is held to the component by test/manifests).
func TestMigrateFenceNames(t *testing.T) {
	raw, err := os.ReadFile("../../config/components/openkruise-fence/admission_policy.yaml")
	require.NoError(t, err)
	objs, err := render.Parse(raw)
	require.NoError(t, err)
	assert.Contains(t, objs, "ValidatingAdmissionPolicyBinding/"+FenceBinding)
}
