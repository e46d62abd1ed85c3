package webhook

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/internal/impact"
	"github.com/sidecarops/sidecarops/internal/testing/testfiles"
)

// blastRadius refuses a SidecarSet selecting more than 2 pods, warns about one selecting every
// namespace, and only logs what it would say about requesters outside group platform.
const blastRadius = `package sidecarsets.radius

deny contains sprintf("selects %d pods, more than 2", [input.impact.pods]) if input.impact.pods > 2

warn contains {"msg": "selects every namespace, present and future", "rule": "all", "field": "spec.namespaceSelector"} if input.impact.allNamespaces

dryrun contains sprintf("%s is not in group platform", [input.userInfo.username]) if not "platform" in input.userInfo.groups
`

func TestSidecarSetValidatorGoverns(t *testing.T) {
	dir := t.TempDir()
	testfiles.Write(t, dir, map[string]string{
		".manifest":          `{"revision":"radius-1","roots":["sidecarsets/radius"]}`,
		"radius/policy.rego": blastRadius,
	})
	b, err := bundles.Read(dir, nil)
	require.NoError(t, err)
	eng := newEngine(t, policyState{admin: []*bundle.Bundle{b}})
	restricted := map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}
	impacts := impact.Over{
		Namespaces: impact.NamespaceList{
			{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"team": "shop"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "bank", Labels: restricted}},
		},
		Pods: impact.Static{{Namespace: "shop", Labels: map[string]string{"app": "web"}, Count: 2}, {Namespace: "bank", Labels: map[string]string{"app": "web"}, Count: 1}},
	}
	shopOnly := func(ss *v1beta1.SidecarSet) *v1beta1.SidecarSet {
		ss.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "shop"}}
		return ss
	}
	privileged := func(ss *v1beta1.SidecarSet) *v1beta1.SidecarSet {
		ss.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		return ss
	}
	as := func(req admissionv1.AdmissionRequest, user string, groups ...string) admissionv1.AdmissionRequest {
		req.UserInfo = authenticationv1.UserInfo{Username: user, Groups: groups}
		return req
	}
	for _, tc := range []struct {
		name     string
		req      admissionv1.AdmissionRequest
		code     int32
		message  string
		warnings []string
		logged   string
	}{{
		name:    "every namespace, 3 pods: refused, with the warning",
		req:     as(sidecarSetRequest(t, admissionv1.Create, minimalSidecarSet("mesh", "web", "proxy"), nil), "alice", "platform"),
		code:    http.StatusForbidden,
		message: `sidecarsets.apps.kruise.io "mesh" is forbidden: denied by the SidecarSet policies: [radius] selects 3 pods, more than 2`,
		// The plain sidecar sets no securityContext, which restricted asks for.
		warnings: []string{"sidecarops policy [radius/all] spec.namespaceSelector: selects every namespace, present and future", `sidecarops: SidecarSet mesh: its sidecars violate PodSecurity "restricted:latest" of namespace bank, which refuses the pods it injects into there: ` +
			`allowPrivilegeEscalation != false (container "proxy" must set securityContext.allowPrivilegeEscalation=false), ` +
			`unrestricted capabilities (container "proxy" must set securityContext.capabilities.drop=["ALL"])`},
		logged: `"allowed"=false`,
	}, {
		name:   "one namespace, 2 pods: admitted; the dry run is only logged",
		req:    as(sidecarSetRequest(t, admissionv1.Create, shopOnly(minimalSidecarSet("mesh", "web", "proxy")), nil), "bob"),
		code:   http.StatusOK,
		logged: `"dryrun"=["[radius] bob is not in group platform"]`,
	}, {
		name: "a privileged sidecar selecting a restricted namespace: the Pod Security warning",
		req: as(sidecarSetRequest(t, admissionv1.Create, privileged(func() *v1beta1.SidecarSet {
			ss := minimalSidecarSet("mesh", "web", "proxy")
			ss.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{v1beta1.NamespaceNameLabel: "bank"}}
			return ss
		}()), nil), "alice", "platform"),
		code: http.StatusOK,
		warnings: []string{`sidecarops: SidecarSet mesh: its sidecars violate PodSecurity "restricted:latest" of namespace bank, which refuses the pods it injects into there: ` +
			`privileged (container "proxy" must not set securityContext.privileged=true), ` +
			`allowPrivilegeEscalation != false (container "proxy" must set securityContext.allowPrivilegeEscalation=false), ` +
			`unrestricted capabilities (container "proxy" must set securityContext.capabilities.drop=["ALL"])`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var lines []string
			log := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{})
			resp := admit(t, &SidecarSetValidator{Snapshots: eng, Impacts: impacts, DecisionLog: log}, tc.req)
			require.NotNil(t, resp.Result)
			assert.Equal(t, tc.code, resp.Result.Code, resp.Result.Message)
			assert.Equal(t, tc.code == http.StatusOK, resp.Allowed)
			assert.Equal(t, tc.message, resp.Result.Message)
			assert.Equal(t, tc.warnings, resp.Warnings)
			require.Len(t, lines, 1, "one decision log line per review")
			assert.Contains(t, lines[0], `"revision"=`)
			assert.Contains(t, lines[0], tc.logged)
		})
	}
}

// namespaceLabels answers PodSecurity's namespace lookups from a map.
type namespaceLabels map[string]map[string]string

func (n namespaceLabels) Labels(ns string) (map[string]string, bool) {
	l, ok := n[ns]
	return l, ok
}

// recorded keeps the Events a recorder was asked for.
type recorded struct{ events []string }

func (r *recorded) Eventf(regarding, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	ss := regarding.(*v1beta1.SidecarSet)
	r.events = append(r.events, fmt.Sprintf("%s %s %s %s: %s", eventtype, reason, action, ss.Name, fmt.Sprintf(note, args...)))
}

// A pod that passes its namespace's enforced level and fails it once injected gets a warning naming
// the SidecarSet and the check, and the SidecarSet an Event; the pod is still admitted (patched):
// refusing it is Pod Security's part.
func TestPodInjectorPodSecurity(t *testing.T) {
	privileged := minimalSidecarSet("mesh", "web", "proxy")
	privileged.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	eng := newEngine(t, policyState{sidecarSets: []*v1beta1.SidecarSet{privileged}})
	namespaces := namespaceLabels{
		"bank": {"pod-security.kubernetes.io/enforce": "baseline"},
		"shop": {},
	}
	app := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	}
	hostNetwork := app()
	hostNetwork.Spec.HostNetwork = true
	warning := `sidecarops: injecting SidecarSet mesh makes the pod violate PodSecurity "baseline:latest": privileged (container "proxy" must not set securityContext.privileged=true)`
	for _, tc := range []struct {
		name, ns string
		pod      *corev1.Pod
		dryRun   bool
		warnings []string
		events   []string
	}{{
		name: "baseline enforced, passed before: warned and recorded", ns: "bank", pod: app(),
		warnings: []string{warning},
		events:   []string{`Warning PodSecurityViolation Inject mesh: ` + warning + ` (pod bank/web-1)`},
	}, {
		name: "a dry run is warned, and records nothing (sideEffects: NoneOnDryRun)", ns: "bank", pod: app(), dryRun: true,
		warnings: []string{warning},
	}, {
		name: "the pod failed already: nothing of ours to say", ns: "bank", pod: hostNetwork,
	}, {
		name: "nothing enforced", ns: "shop", pod: app(),
	}, {
		name: "a namespace not known yet", ns: "new", pod: app(),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorded{}
			p := &PodInjector{Snapshots: eng, PodSecurity: &PodSecurity{Namespaces: namespaces, Recorder: rec}}
			req := podRequest(t, tc.ns, tc.pod)
			req.DryRun = ptr.To(tc.dryRun)
			resp := admit(t, p, req)
			require.True(t, resp.Allowed, resp.Result)
			require.NotNil(t, resp.Patch, "injected either way")
			assert.Equal(t, tc.warnings, resp.Warnings)
			assert.Equal(t, tc.events, rec.events)
		})
	}
}
