package agent

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// The Role of config/agent lets the agent's ServiceAccount patch every pod of its namespace (RBAC
// cannot name "the pod I run in"); config/agent-policy narrows it to the pod its token is bound to,
// and there to labels, annotations and status conditions. Before, any container of a pod with the
// agent could change any pod's image with that token.
func TestAgentWritesOnlyItsOwnPod(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	agentIdentity(t, ns)
	installAgentPolicy(t)
	pod(t, ns, "game-0", nil)
	pod(t, ns, "game-1", nil)
	own := get(t, ns, pods, "game-0")

	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	client := func(bound bool) dynamic.Interface {
		req := &authenticationv1.TokenRequest{}
		if bound {
			req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: own.GetName(), UID: own.GetUID()}
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "sidecar-agent", req, metav1.CreateOptions{})
		require.NoError(t, err)
		cfg := rest.AnonymousClientConfig(env.Config)
		cfg.BearerToken = tr.Status.Token
		c, err := dynamic.NewForConfig(cfg)
		require.NoError(t, err)
		return c
	}
	agent := client(true)
	// Strategic merge patches key conditions by type, as the agent's do: a case adds or changes one
	// condition and leaves the others alone.
	patch := func(c dynamic.Interface, name, body string, subresources ...string) error {
		_, err := c.Resource(pods).Namespace(ns).Patch(ctx, name, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, subresources...)
		return err
	}

	// The API server enforces a new policy once it has loaded it.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := patch(agent, "game-1", `{"metadata":{"labels":{"x":"y"}}}`)
		if assert.Error(c, err, "another pod of the namespace") {
			assert.Contains(c, err.Error(), "only the pod it runs in")
		}
	}, time.Minute, 100*time.Millisecond)

	// Conditions of the kubelet's types, as the kubelet would have written them.
	_, err = admin.Resource(pods).Namespace(ns).Patch(ctx, "game-0", types.MergePatchType,
		[]byte(`{"status":{"conditions":[{"type":"Ready","status":"False"},{"type":"PodScheduled","status":"True"}]}}`), metav1.PatchOptions{}, "status")
	require.NoError(t, err)

	require.NoError(t, patch(agent, "game-0", `{"metadata":{"labels":{"x":"y"},"annotations":{"example.com/state":"ready"}}}`), "its own labels and annotations")
	require.NoError(t, patch(agent, "game-0", `{"status":{"conditions":[{"type":"example.com/Ready","status":"True","reason":"idle","message":"ok"}]}}`, "status"), "its own condition")
	require.NoError(t, patch(agent, "game-0", `{"status":{"conditions":[{"type":"example.com/Ready","status":"False","reason":"busy","message":"full"}]}}`, "status"), "its own condition, changed")

	const spec, meta, status, conditions = "may not change a pod's spec", "only a pod's labels and annotations",
		"only a pod's status conditions", "never the kubelet's or Kubernetes' own"
	for _, tc := range []struct{ what, body, sub, message string }{
		{"its own image", `{"spec":{"containers":[{"name":"game","image":"evil:1"}]}}`, "", spec},
		{"its own deadline", `{"spec":{"activeDeadlineSeconds":1}}`, "", spec},
		{"its own finalizers", `{"metadata":{"finalizers":["example.com/keep"]}}`, "", meta},
		{"its own owners", `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"00000000-0000-0000-0000-000000000001"}]}}`, "", meta},
		{"its own finalizers through status", `{"metadata":{"finalizers":["example.com/keep"]}}`, "status", meta},
		{"its own phase", `{"status":{"phase":"Failed"}}`, "status", status},
		{"its host's address", `{"status":{"hostIP":"10.0.0.1"}}`, "status", status},
		{"its host's addresses", `{"status":{"hostIP":"10.0.0.1","hostIPs":[{"ip":"10.0.0.1"}]}}`, "status", status},
		{"its status message", `{"status":{"message":"forged"}}`, "status", status},
		{"its status reason", `{"status":{"reason":"Evicted"}}`, "status", status},
		{"its nominated node", `{"status":{"nominatedNodeName":"node-1"}}`, "status", status},
		{"its start time", `{"status":{"startTime":"2024-01-01T00:00:00Z"}}`, "status", status},
		{"an ephemeral container's status", `{"status":{"ephemeralContainerStatuses":[{"name":"debug","image":"evil:1","imageID":"",` +
			`"ready":true,"restartCount":0,"state":{"running":{"startedAt":"2024-01-01T00:00:00Z"}}}]}}`, "status", status},
		{"a container's status", `{"status":{"containerStatuses":[{"name":"game","image":"evil:1","imageID":"",` +
			`"ready":true,"restartCount":0,"state":{"running":{"startedAt":"2024-01-01T00:00:00Z"}}}]}}`, "status", status},
		{"the kubelet's Ready", `{"status":{"conditions":[{"type":"Ready","status":"True"}]}}`, "status", conditions},
		{"a new ContainersReady", `{"status":{"conditions":[{"type":"ContainersReady","status":"True"}]}}`, "status", conditions},
		{"a new DisruptionTarget", `{"status":{"conditions":[{"type":"DisruptionTarget","status":"True","reason":"EvictionByEvictionAPI"}]}}`, "status", conditions},
		{"the kubelet's PodScheduled, removed", `{"status":{"conditions":[{"type":"PodScheduled","$patch":"delete"}]}}`, "status", conditions},
		{"an unprefixed type", `{"status":{"conditions":[{"type":"Probed","status":"True"}]}}`, "status", conditions},
		{"a type of Kubernetes' domain", `{"status":{"conditions":[{"type":"scheduling.k8s.io/Ready","status":"True"}]}}`, "status", conditions},
		{"a type of Kubernetes' other domain", `{"status":{"conditions":[{"type":"kubernetes.io/Ready","status":"True"}]}}`, "status", conditions},
	} {
		var sub []string
		if tc.sub != "" {
			sub = []string{tc.sub}
		}
		err := patch(agent, "game-0", tc.body, sub...)
		if assert.Error(t, err, tc.what) {
			assert.Contains(t, err.Error(), tc.message, tc.what)
		}
	}
	got := get(t, ns, pods, "game-0")
	conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	assert.Len(t, conds, 3, "the kubelet's conditions and the agent's")
	for _, field := range []string{"hostIP", "hostIPs", "message", "reason", "nominatedNodeName", "startTime", "ephemeralContainerStatuses", "containerStatuses"} {
		assert.NotContains(t, got.Object["status"], field)
	}

	// A terminating pod's agent still writes its condition: deletion sets metadata the agent did not.
	_, err = admin.Resource(pods).Namespace(ns).Patch(ctx, "game-0", types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":["example.com/keep"]}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.NoError(t, admin.Resource(pods).Namespace(ns).Delete(ctx, "game-0", metav1.DeleteOptions{}))
	t.Cleanup(func() {
		_, _ = admin.Resource(pods).Namespace(ns).Patch(ctx, "game-0", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	require.NoError(t, patch(agent, "game-0", `{"status":{"conditions":[{"type":"example.com/Ready","status":"False","reason":"stopping","message":"bye"}]}}`, "status"),
		"its own condition while terminating")
	err = patch(client(false), "game-0", `{"metadata":{"labels":{"x":"z"}}}`)
	if assert.Error(t, err, "a token bound to no pod writes no pod") {
		assert.Contains(t, err.Error(), "only the pod it runs in")
	}
}

// installAgentPolicy creates the objects of config/agent-policy for the rest of the test.
func installAgentPolicy(t *testing.T) {
	t.Helper()
	cmd := exec.Command("kubectl", "kustomize", "../../config/agent-policy")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kubectl kustomize config/agent-policy: %s", stderr.String())
	resources := map[string]schema.GroupVersionResource{
		"ValidatingAdmissionPolicy":        {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
		"ValidatingAdmissionPolicyBinding": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
	}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
		u := &unstructured.Unstructured{Object: obj}
		gvr, ok := resources[u.GetKind()]
		require.True(t, ok, fmt.Sprintf("config/agent-policy has a %s", u.GetKind()))
		_, err := admin.Resource(gvr).Create(context.Background(), u, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = admin.Resource(gvr).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
	}
}
