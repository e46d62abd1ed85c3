package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/sidecarops/sidecarops/agent"
	"github.com/sidecarops/sidecarops/agent/plugins"
	"github.com/sidecarops/sidecarops/agent/storage"
)

var (
	gameServers = schema.GroupVersionResource{Group: "game.kruise.io", Version: "v1alpha1", Resource: "gameservers"}
	pods        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	configMaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	listOne     = metav1.ListOptions{Limit: 1}
	// wait bounds every Eventually: the CI machine is slow and shared.
	wait = 2 * time.Minute
	tick = 50 * time.Millisecond
)

func randomSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// namespace creates a fresh namespace for one test.
func namespace(t *testing.T) string {
	t.Helper()
	ns := "agent-" + randomSuffix()
	create(t, "", schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}})
	return ns
}

func create(t *testing.T, ns string, gvr schema.GroupVersionResource, obj map[string]any) *unstructured.Unstructured {
	t.Helper()
	var ri dynamic.ResourceInterface = admin.Resource(gvr)
	if ns != "" {
		ri = admin.Resource(gvr).Namespace(ns)
	}
	out, err := ri.Create(context.Background(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	require.NoError(t, err)
	return out
}

func get(t *testing.T, ns string, gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	t.Helper()
	out, err := admin.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return out
}

// agentIdentity installs config/agent (ServiceAccount, Role, RoleBinding, rendered with kubectl
// kustomize as an administrator would) into ns and returns a client authenticated as that
// ServiceAccount: the agent runs with exactly the permissions config/agent grants.
func agentIdentity(t *testing.T, ns string) dynamic.Interface {
	t.Helper()
	cmd := exec.Command("kubectl", "kustomize", "../../config/agent")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kubectl kustomize config/agent: %s", stderr.String())
	resources := map[string]schema.GroupVersionResource{
		"ServiceAccount": {Version: "v1", Resource: "serviceaccounts"},
		"Role":           {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		"RoleBinding":    {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	}
	var sa string
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
		u := unstructured.Unstructured{Object: obj}
		gvr, ok := resources[u.GetKind()]
		require.True(t, ok, "config/agent has a %s; this test only knows %v", u.GetKind(), resources)
		u.SetNamespace(ns)
		if u.GetKind() == "RoleBinding" {
			subjects, _, _ := unstructured.NestedSlice(obj, "subjects")
			for _, s := range subjects {
				s.(map[string]any)["namespace"] = ns
			}
			require.NoError(t, unstructured.SetNestedSlice(obj, subjects, "subjects"))
		}
		if u.GetKind() == "ServiceAccount" {
			sa = u.GetName()
		}
		create(t, ns, gvr, obj)
	}
	require.NotEmpty(t, sa, "config/agent has no ServiceAccount")
	user, err := env.AddUser(envtest.User{
		Name:   "system:serviceaccount:" + ns + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}, nil)
	require.NoError(t, err)
	c, err := dynamic.NewForConfig(user.Config())
	require.NoError(t, err)
	return c
}

// pod creates a pod (never scheduled: only its metadata and status are written) running as the
// agent's ServiceAccount.
func pod(t *testing.T, ns, name string, labels map[string]any, owners ...any) {
	t.Helper()
	meta := map[string]any{"name": name, "labels": labels}
	if len(owners) > 0 {
		meta["ownerReferences"] = owners
	}
	create(t, ns, pods, map[string]any{
		"apiVersion": "v1", "kind": "Pod", "metadata": meta,
		"spec": map[string]any{
			"serviceAccountName": "sidecar-agent", "automountServiceAccountToken": false, "shareProcessNamespace": true,
			"containers": []any{map[string]any{"name": "game", "image": "game:1"}},
		},
	})
}

// startAgent runs the agent with the built-in plugins and config as its config.yaml until the
// test ends, and returns its base URL.
func startAgent(t *testing.T, client dynamic.Interface, ns, podName, config string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o644))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	self := storage.Self{PodName: podName, PodNamespace: ns}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, agent.RunOptions{
			ManagerOptions: agent.ManagerOptions{Registry: plugins.Builtin(), Logger: testr.New(t), Self: self,
				Kube: &storage.Kube{Client: client, Self: self}, InitialBackoff: 200 * time.Millisecond},
			ConfigPath: path, Listener: ln,
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(wait):
			t.Error("the agent did not stop")
		}
	})
	return "http://" + ln.Addr().String()
}
