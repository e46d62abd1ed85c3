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
	patch := func(c dynamic.Interface, name, body string, subresources ...string) error {
		_, err := c.Resource(pods).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{}, subresources...)
		return err
	}

	// The API server enforces a new policy once it has loaded it.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := patch(agent, "game-1", `{"metadata":{"labels":{"x":"y"}}}`)
		if assert.Error(c, err, "another pod of the namespace") {
			assert.Contains(c, err.Error(), "only the pod it runs in")
		}
	}, time.Minute, 100*time.Millisecond)

	require.NoError(t, patch(agent, "game-0", `{"metadata":{"labels":{"x":"y"},"annotations":{"example.com/state":"ready"}}}`), "its own labels and annotations")
	require.NoError(t, patch(agent, "game-0", `{"status":{"conditions":[{"type":"example.com/Ready","status":"True"}]}}`, "status"), "its own conditions")
	for _, tc := range []struct{ what, body, sub, message string }{
		{"its own image", `{"spec":{"containers":[{"name":"game","image":"evil:1"}]}}`, "", "may not change a pod's spec"},
		{"its own owners", `{"metadata":{"finalizers":["example.com/keep"]}}`, "", "only a pod's labels and annotations"},
		{"its own phase", `{"status":{"phase":"Failed"}}`, "status", "only a pod's status conditions"},
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
