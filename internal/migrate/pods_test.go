package migrate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/internal/podwebhook"
)

// injectedPod is pod name in ns as OpenKruise injects it from the SidecarSets named.
func injectedPod(ns, name string, podLabels map[string]string, sets ...string) client.Object {
	hash := "{"
	for i, s := range sets {
		if i > 0 {
			hash += ","
		}
		hash += `"` + s + `":{"hash":"h","sidecarSetName":"` + s + `"}`
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: podLabels, Annotations: map[string]string{
		"kruise.io/sidecarset-hash": hash + "}",
	}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
}

func namespace(name string, nsLabels map[string]string) client.Object {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: nsLabels}}
}

// TestMigrateUnseenPods: the pods OpenKruise injected from a SidecarSet still there, which the
// installed pod webhook (or, not installed yet, the default install's) will not see, per namespace
// and reason, each with what lets the webhook see them.
func TestMigrateUnseenPods(t *testing.T) {
	pods := []client.Object{
		sidecarSetKind.crd(true), patching("mesh"),
		namespace("kube-system", nil), namespace("shop", nil), namespace("sidecarops-system", map[string]string{podwebhook.ControlPlaneLabel: ""}),
		namespace("ingress", map[string]string{"control-plane": "ingress"}),
		injectedPod("kube-system", "dns-1", nil, "mesh"), injectedPod("kube-system", "dns-2", nil, "other", "mesh"),
		injectedPod("kube-system", "gone", nil, "deleted"), // its SidecarSet injects nothing more
		injectedPod("shop", "web", map[string]string{"sidecar": "off"}, "mesh"),
		injectedPod("shop", "api", nil, "mesh"),
		injectedPod("ingress", "nginx", nil, "mesh"),
		injectedPod("sidecarops-system", "manager", nil, "mesh"),
	}
	installed := &admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "sidecarops"}, Webhooks: []admissionregv1.MutatingWebhook{{
		Name:              "mpod.sidecarops.io",
		NamespaceSelector: podwebhook.NamespaceSelector("sidecarops-system", []string{"kube-system", "monitoring"}, nil),
		ObjectSelector:    &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "sidecar", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"off"}}}},
		MatchConditions:   []admissionregv1.MatchCondition{{Name: podwebhook.ConditionName, Expression: "true"}},
	}}}
	const refusedMesh = "SidecarSet mesh would be refused" // it patches without a whitelist

	// Not installed yet: the chart's default sees kube-system and shop's pods whatever their labels.
	r := check(t, nil, pods...)
	outcome{
		warnings: []string{
			refusedMesh,
			"1 pod(s) in namespace ingress were injected by OpenKruise (kruise.io/sidecarset-hash) and sidecarops' pod webhook, as the chart installs it by default in sidecarops-system (no MutatingWebhookConfiguration sidecarops yet), will not see them: namespace ingress is labelled control-plane, a control plane's; once OpenKruise is stopped their new pods are created without sidecars",
			"1 pod(s) in namespace sidecarops-system were injected by OpenKruise (kruise.io/sidecarset-hash) and sidecarops' pod webhook, as the chart installs it by default in sidecarops-system (no MutatingWebhookConfiguration sidecarops yet), will not see them: namespace sidecarops-system is excluded",
		},
		fixes: []string{"kubectl label namespace ingress control-plane-", "move these workloads out of sidecarops-system"},
	}.check(t, r)

	// Installed, with kube-system and monitoring excluded and an object selector; on path B.
	r = check(t, nil, all(pods, []client.Object{installed, cloneSets.crd(true), cloneSets.object("web")})...)
	assert.Equal(t, PathB, r.Path)
	then := "; OpenKruise's pod webhook goes on injecting their new pods alone, outside sidecarops' gates, whitelist and collision rules"
	outcome{
		warnings: []string{
			refusedMesh,
			"1 pod(s) in namespace ingress were injected by OpenKruise (kruise.io/sidecarset-hash) and sidecarops' pod webhook, of MutatingWebhookConfiguration sidecarops, will not see them: namespace ingress is labelled control-plane, a control plane's" + then,
			"2 pod(s) in namespace kube-system were injected by OpenKruise (kruise.io/sidecarset-hash) and sidecarops' pod webhook, of MutatingWebhookConfiguration sidecarops, will not see them: namespace kube-system is excluded" + then,
			"1 pod(s) in namespace shop were injected by OpenKruise (kruise.io/sidecarset-hash) and sidecarops' pod webhook, of MutatingWebhookConfiguration sidecarops, will not see them: the pod does not match its objectSelector (sidecar notin (off))" + then,
			"1 pod(s) in namespace sidecarops-system",
		},
		fixes: []string{
			`helm upgrade sidecarops CHART -n sidecarops-system --reuse-values --set-json 'webhookConfiguration.excludedNamespaces=["monitoring"]'   # kube-system taken out`,
			"--set-json 'webhookConfiguration.objectSelector={}'",
		},
	}.check(t, r)
}

// pager serves pods a page at a time, as the API server does (the fake client ignores Limit), and
// counts the pages and the most pods one held.
type pager struct {
	client.Reader
	pages, most int
}

func (p *pager) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	pods, ok := list.(*corev1.PodList)
	if !ok {
		return p.Reader.List(ctx, list, opts...)
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	if o.Limit <= 0 {
		return errors.New("pods listed without a page size")
	}
	var every corev1.PodList
	if err := p.Reader.List(ctx, &every); err != nil {
		return err
	}
	from := 0
	if o.Continue != "" {
		var err error
		if from, err = strconv.Atoi(o.Continue); err != nil {
			return err
		}
	}
	to := min(from+int(o.Limit), len(every.Items))
	pods.Items, pods.Continue = every.Items[from:to], ""
	if to < len(every.Items) {
		pods.Continue = strconv.Itoa(to)
	}
	p.pages++
	p.most = max(p.most, len(pods.Items))
	return nil
}

// TestMigratePodPages: the pods are read a page at a time, and every page counts.
func TestMigratePodPages(t *testing.T) {
	objs := []client.Object{sidecarSetKind.crd(true), namespace("games", nil)}
	for i := range 7 {
		objs = append(objs, pod(fmt.Sprintf("ordered-%d", i), func(p *corev1.Pod) {
			p.Annotations = map[string]string{"apps.kruise.io/container-launch-priority": "Ordered", "kruise.io/sidecarset-injected-list": "mesh"}
		}))
	}
	p := &pager{Reader: fakeCluster(t, nil, objs...)}
	r, err := Check(context.Background(), p, Options{PageSize: 3})
	require.NoError(t, err)
	assert.Equal(t, 3, p.pages, "7 pods in pages of 3")
	assert.Equal(t, 3, p.most)
	require.Len(t, r.Features, 1)
	assert.Equal(t, 7, r.Features[0].Count)
	assert.Contains(t, r.Found, "0 SidecarSet(s), 0 of their ControllerRevisions in kruise-system, 7 pod(s) injected")
}
