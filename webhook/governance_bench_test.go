package webhook

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/internal/impact"
)

// benchCluster is 100 namespaces of 10 teams, every fifth enforcing restricted, and 10,000 pods: in
// each namespace 8 Deployments of 10 replicas (one label set each) and 20 StatefulSet pods (a label
// set each).
func benchCluster() impact.Over {
	namespaces, census := impact.NewNamespaces(), impact.NewCensus()
	for i := range 100 {
		name := fmt.Sprintf("ns-%03d", i)
		labels := map[string]string{"team": fmt.Sprintf("team-%d", i%10), v1beta1.NamespaceNameLabel: name}
		if i%5 == 0 {
			labels["pod-security.kubernetes.io/enforce"] = "restricted"
		}
		namespaces.OnAdd(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, true)
		for d := range 8 {
			for r := range 10 {
				census.OnAdd(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: fmt.Sprintf("d%d-%d", d, r),
					Labels: map[string]string{"app": fmt.Sprintf("app-%d", d), "pod-template-hash": fmt.Sprintf("h%d", d)}}}, true)
			}
		}
		for p := range 20 {
			census.OnAdd(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: fmt.Sprintf("db-%d", p),
				Labels: map[string]string{"app": "db", "statefulset.kubernetes.io/pod-name": fmt.Sprintf("db-%d", p)}}}, true)
		}
	}
	return impact.Over{Namespaces: namespaces, Pods: census}
}

// BenchmarkSidecarSetValidator is one SidecarSet admission with the example SidecarSet policies
// (examples/policies) loaded beside 1,000 SidecarSets, over a cluster of 100 namespaces and 10,000
// pods: OpenKruise's rules and conflicts, the impact view, Pod Security's checks and the policies.
// Each admission is timed; p99-ms is the 99th percentile.
func BenchmarkSidecarSetValidator(b *testing.B) {
	examples, err := bundles.Read("../examples/policies", nil)
	require.NoError(b, err)
	eng := newEngine(b, policyState{sidecarSets: benchFleet(b, 1000, 1), admin: []*bundle.Bundle{examples}})
	h := &admission.Webhook{Handler: &SidecarSetValidator{Snapshots: eng, Impacts: benchCluster()}}
	for _, tc := range []struct {
		name  string
		scope *metav1.LabelSelector
	}{
		{"scope=team", &metav1.LabelSelector{MatchLabels: map[string]string{"team": "team-1"}}},
		{"scope=all", nil},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ss := minimalSidecarSet("tenant-mesh", "app-1", "proxy")
			ss.Spec.NamespaceSelector = tc.scope
			req := sidecarSetRequest(b, admissionv1.Create, ss, nil)
			req.UserInfo = authenticationv1.UserInfo{Username: "alice", Groups: []string{"tenant:team-1"}}
			areq := admission.Request{AdmissionRequest: req}
			resp := h.Handle(context.Background(), areq)
			b.Logf("allowed=%v %s; %d warning(s)", resp.Allowed, resp.Result.Message, len(resp.Warnings))
			var took []time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				h.Handle(context.Background(), areq)
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)*99/100])/float64(time.Millisecond), "p99-ms")
		})
	}
}
