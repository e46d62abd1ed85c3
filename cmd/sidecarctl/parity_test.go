package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/impact"
	"github.com/sidecarops/sidecarops/internal/injector"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/findings"
	"github.com/sidecarops/sidecarops/mutation"
	"github.com/sidecarops/sidecarops/policies/strict"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
	"github.com/sidecarops/sidecarops/webhook"
)

// fixedSnapshot serves one snapshot to a webhook.
type fixedSnapshot struct{ snap *engine.Snapshot }

func (f fixedSnapshot) Current() *engine.Snapshot { return f.snap }

// governedInput reads governed as the tests of the webhook are given it: the SidecarSet as the
// defaulting webhook stores it, and the Namespaces.
func governedInput(t *testing.T) (*v1beta1.SidecarSet, []*corev1.Namespace) {
	t.Helper()
	objs, err := manifest.Decode("governed", []byte(governed))
	require.NoError(t, err)
	var ss *v1beta1.SidecarSet
	var namespaces []*corev1.Namespace
	for _, o := range objs {
		switch obj := o.Obj.(type) {
		case *v1beta1.SidecarSet:
			ss = obj
		case *corev1.Namespace:
			namespaces = append(namespaces, obj)
		}
	}
	require.NotNil(t, ss)
	require.NoError(t, defaults.SidecarSetAndHash(ss))
	return ss, namespaces
}

// governedSnapshot is the snapshot the manager would serve with the bundle of the tests' policies
// and the strict policy loaded as administrators' bundles, before the SidecarSet exists.
func governedSnapshot(t *testing.T, state bundles.State) *engine.Snapshot {
	t.Helper()
	platform, err := bundles.Read("testdata/policies", nil)
	require.NoError(t, err)
	shipped, err := strict.Bundle()
	require.NoError(t, err)
	snap, err := injector.Snapshot(context.Background(), injector.Policies{State: state, Admin: []*bundle.Bundle{platform, shipped}})
	require.NoError(t, err)
	return snap
}

// Issue 37 item 1, by construction: on the same SidecarSet, Namespaces, workloads, bundles and
// requester, check's findings about the SidecarSet are the validating webhook's answer — its
// refusal's messages, its warnings, and the dry-run findings it only logs. The webhook gets the
// namespaces and pods as the test reads the input (the Deployment's 3 replicas in shop, which no
// document describes; the Pod in bank), not as check builds them.
func TestCheckAndAdmissionGiveTheSameVerdict(t *testing.T) {
	ss, namespaces := governedInput(t)
	impacts := impact.Over{
		Namespaces: append(impact.NamespaceList(namespaces), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}),
		Pods: impact.Static{
			{Namespace: "shop", Labels: map[string]string{"app": "web"}, Count: 3},
			{Namespace: "bank", Labels: map[string]string{"app": "web"}, Count: 1},
		},
	}
	snap := governedSnapshot(t, bundles.State{Namespaces: namespaces})
	raw, err := json.Marshal(ss)
	require.NoError(t, err)
	gvk := metav1.GroupVersionKind{Group: "apps.kruise.io", Version: "v1beta1", Kind: "SidecarSet"}
	for _, tc := range []struct {
		name    string
		args    []string
		user    authenticationv1.UserInfo
		refused bool
	}{
		{"refused", []string{"--as", "alice", "--as-group", "dev"},
			authenticationv1.UserInfo{Username: "alice", Groups: []string{"dev", "system:authenticated"}}, true},
		{"admitted", []string{"--as", "bob", "--as-group", "platform"},
			authenticationv1.UserInfo{Username: "bob", Groups: []string{"platform", "system:authenticated"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			report, _ := checkJSON(t, governed, append([]string{"-f", "-", "--bundle", policyBundle}, tc.args...)...)
			var denied, warned, logged []string
			for _, f := range report.Findings {
				if f.Kind != "SidecarSet" {
					continue // the Pod's own Pod Security finding is the pod webhook's
				}
				said := engine.Finding{Rule: strings.TrimPrefix(f.Rule, findings.PolicyPrefix), Message: f.Message, Field: f.Field}.String()
				switch {
				case f.Rule == findings.RulePodSecurity:
					warned = append(warned, f.Message)
				case f.Severity == findings.SeverityError:
					denied = append(denied, said)
				case f.Severity == findings.SeverityWarning:
					warned = append(warned, "sidecarops policy "+said)
				default:
					logged = append(logged, said)
				}
			}
			require.NotEmpty(t, warned)
			require.NotEmpty(t, logged)

			var lines []string
			log := funcr.NewJSON(func(obj string) { lines = append(lines, obj) }, funcr.Options{})
			h := &webhook.SidecarSetValidator{Snapshots: fixedSnapshot{snap}, Impacts: impacts, DecisionLog: log}
			resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID: "uid", Kind: gvk, RequestKind: &gvk, Name: ss.Name, Operation: admissionv1.Create,
				UserInfo: tc.user, Object: runtime.RawExtension{Raw: raw},
			}})
			assert.Equal(t, !tc.refused, resp.Allowed)
			if tc.refused {
				require.NotNil(t, resp.Result)
				assert.Equal(t, `sidecarsets.apps.kruise.io "mesh" is forbidden: denied by the SidecarSet policies: `+strings.Join(denied, "; "), resp.Result.Message)
			} else {
				assert.Empty(t, denied)
			}
			slices.Sort(warned)
			got := slices.Clone(resp.Warnings)
			slices.Sort(got)
			assert.Equal(t, warned, got)
			require.Len(t, lines, 1)
			var decision struct {
				DryRun []string `json:"dryrun"`
			}
			require.NoError(t, json.Unmarshal([]byte(lines[0]), &decision))
			assert.Equal(t, logged, decision.DryRun)
		})
	}
}

// Issue 37 item 3: inject and explain warn of a pod that injection makes fail the Pod Security level
// its Namespace enforces, in the words of the pod webhook, which the test asks; of no pod elsewhere.
func TestPodSecurityOfflineIsThePodWebhooks(t *testing.T) {
	ss, namespaces := governedInput(t)
	nsCache := impact.NewNamespaces()
	for _, ns := range namespaces {
		nsCache.OnAdd(ns, true)
	}
	h := &webhook.PodInjector{
		Snapshots:   fixedSnapshot{governedSnapshot(t, bundles.State{SidecarSets: []*v1beta1.SidecarSet{ss}, Namespaces: namespaces})},
		Injector:    &mutation.Injector{Now: time.Now, Rand: func() float64 { return 0 }},
		PodSecurity: &webhook.PodSecurity{Namespaces: nsCache},
	}
	objs, err := manifest.Decode("governed", []byte(governed))
	require.NoError(t, err)
	var teller *corev1.Pod
	for _, o := range objs {
		if p, ok := o.Obj.(*corev1.Pod); ok {
			teller = p
		}
	}
	require.NotNil(t, teller)
	warnings := podResponse(t, h, teller).Warnings
	require.Len(t, warnings, 1)
	said := warnings[0]
	assert.Contains(t, said, "makes the pod violate PodSecurity")

	_, errOut, code := sidecarctl(t, governed, "inject", "-f", "-")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, []string{"warning: <stdin>: document 4 (Pod/teller): " + said}, stderrLines(errOut),
		"the Deployment's namespace, shop, enforces nothing: no warning")

	out, _, code := sidecarctl(t, governed, "explain", "-f", "-")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "Pod/teller (namespace bank):\n  mesh: matches\n  warning: "+said+"\n")
	assert.Contains(t, out, "Deployment/web (namespace shop):\n  mesh: matches\n")
	assert.Equal(t, 1, strings.Count(out, "warning:"))
}
