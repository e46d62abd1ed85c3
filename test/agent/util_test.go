package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/sidecarops/sidecarops/agent"
	"github.com/sidecarops/sidecarops/agent/auth"
	"github.com/sidecarops/sidecarops/agent/plugins"
	"github.com/sidecarops/sidecarops/agent/storage"
	"github.com/sidecarops/sidecarops/internal/kubeauth"
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

// agentIdentity installs config/agent (ServiceAccount, Role, RoleBinding, the ClusterRoles and the
// ClusterRoleBinding, rendered with kubectl kustomize as an administrator would) into ns and returns
// a client configuration authenticated as that ServiceAccount: the agent runs with exactly the
// permissions config/agent grants.
func agentIdentity(t *testing.T, ns string) *rest.Config {
	t.Helper()
	cmd := exec.Command("kubectl", "kustomize", "../../config/agent")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kubectl kustomize config/agent: %s", stderr.String())
	resources := map[string]schema.GroupVersionResource{
		"ServiceAccount":     {Version: "v1", Resource: "serviceaccounts"},
		"Role":               {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		"RoleBinding":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
		"ClusterRole":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		"ClusterRoleBinding": {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	}
	var sa string
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
		u := unstructured.Unstructured{Object: obj}
		gvr, ok := resources[u.GetKind()]
		require.True(t, ok, "config/agent has a %s; this test only knows %v", u.GetKind(), resources)
		switch u.GetKind() {
		case "ClusterRole":
			// The same in every test's installation: the first one creates it.
			_, err := admin.Resource(gvr).Create(context.Background(), &u, metav1.CreateOptions{})
			if !apierrors.IsAlreadyExists(err) {
				require.NoError(t, err)
			}
			continue
		case "ClusterRoleBinding":
			// One per installation, as token_review.yaml tells administrators.
			u.SetName(u.GetName() + "-" + ns)
		default:
			u.SetNamespace(ns)
		}
		if strings.HasSuffix(u.GetKind(), "RoleBinding") {
			subjects, _, _ := unstructured.NestedSlice(obj, "subjects")
			for _, s := range subjects {
				s.(map[string]any)["namespace"] = ns
			}
			require.NoError(t, unstructured.SetNestedSlice(obj, subjects, "subjects"))
		}
		if u.GetKind() == "ServiceAccount" {
			sa = u.GetName()
		}
		if u.GetKind() == "ClusterRoleBinding" {
			create(t, "", gvr, obj)
			continue
		}
		create(t, ns, gvr, obj)
	}
	require.NotEmpty(t, sa, "config/agent has no ServiceAccount")
	user, err := env.AddUser(envtest.User{
		Name:   "system:serviceaccount:" + ns + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}, nil)
	require.NoError(t, err)
	return user.Config()
}

func dynamicClient(t *testing.T, cfg *rest.Config) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

// caller is a ServiceAccount name of ns, outside the agent's pods (an operator, a controller); with
// grant, bound to config/agent's ClusterRole sidecar-agent-hot-update in ns. It returns a token of
// it for the agent's audience.
func caller(t *testing.T, ns, name string, grant bool) string {
	t.Helper()
	create(t, ns, schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, map[string]any{
		"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": name}})
	if grant {
		create(t, ns, schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}, map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": map[string]any{"name": name},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "sidecar-agent-hot-update"},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": name, "namespace": ns}},
		})
	}
	return token(t, ns, name, "sidecar-agent")
}

// token is a token of ServiceAccount ns/name for audience ("" for the API server's own).
func token(t *testing.T, ns, name, audience string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	req := &authenticationv1.TokenRequest{}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name, req, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}

// agentAPI is a running agent's API, called with a token by default.
type agentAPI struct {
	base, token string
}

// call sends method path (with body, if any) with token as the bearer token ("" sends none) and
// returns the status and the body.
func (a agentAPI) call(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, a.base+path, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// get is GET path as the agent's caller; it must answer 200.
func (a agentAPI) get(t *testing.T, path string) string {
	t.Helper()
	code, body := a.call(t, http.MethodGet, path, a.token, "")
	require.Equal(t, http.StatusOK, code, body)
	return body
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

// startAgent runs the agent as identity with the built-in plugins and config as its config.yaml
// until the test ends, authorising callers as cmd/sidecar-agent does by default; it returns its API,
// called with callerToken.
func startAgent(t *testing.T, identity *rest.Config, ns, podName, config, callerToken string) agentAPI {
	t.Helper()
	return startAgentLogging(t, identity, ns, podName, config, callerToken, testr.New(t))
}

// startAgentLogging is startAgent logging to log.
func startAgentLogging(t *testing.T, identity *rest.Config, ns, podName, config, callerToken string, log logr.Logger) agentAPI {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o644))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	self := storage.Self{PodName: podName, PodNamespace: ns}
	reviews, err := kubernetes.NewForConfig(kubeauth.ClientConfig(identity))
	require.NoError(t, err)
	authz := auth.NewReviewer(auth.Options{Client: reviews, Self: self, Audiences: []string{"sidecar-agent"},
		Resource: schema.GroupResource{Group: "sidecarops.io", Resource: "sidecaragents"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, agent.RunOptions{
			ManagerOptions: agent.ManagerOptions{Registry: plugins.Builtin(), Logger: log, Self: self,
				Kube: &storage.Kube{Client: dynamicClient(t, identity), Self: self}, InitialBackoff: 200 * time.Millisecond},
			ConfigPath: path, Listener: ln, Authorizer: authz,
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
	return agentAPI{base: "http://" + ln.Addr().String(), token: callerToken}
}
