package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
)

// The metrics endpoint answers only callers the API server authenticates and allows GET /metrics
// (the ClusterRole sidecarops-metrics-reader of config/rbac); before, anyone who reached the port
// read them over plain HTTP.
func TestMetricsNeedAnAuthorizedCaller(t *testing.T) {
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(cluster.Config)
	require.NoError(t, err)
	ns := devcluster.Namespace
	reader := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	require.NoError(t, cluster.Client.Create(ctx, reader))
	t.Cleanup(func() { _ = cluster.Client.Delete(ctx, reader) })
	token := func(name string, allowed bool) string {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		require.NoError(t, cluster.Client.Create(ctx, sa))
		t.Cleanup(func() { _ = cluster.Client.Delete(ctx, sa) })
		if allowed {
			b := &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
			}
			require.NoError(t, cluster.Client.Create(ctx, b))
			t.Cleanup(func() { _ = cluster.Client.Delete(ctx, b) })
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		require.NoError(t, err)
		return tr.Status.Token
	}
	// The manager runs with external certificates (envtest's, as cert-manager's would be): the
	// metrics port serves them, so a scraper verifies it against their CA.
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(cluster.Env.WebhookInstallOptions.LocalServingCAData))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	get := func(bearer string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+metricsAddr+"/metrics", nil)
		require.NoError(t, err)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}

	code, _ := get("")
	assert.Equal(t, http.StatusUnauthorized, code, "no credentials")
	code, _ = get("not-a-token")
	assert.Equal(t, http.StatusUnauthorized, code, "a token the API server does not know")
	code, _ = get(token("e2e-not-allowed", false))
	assert.Equal(t, http.StatusForbidden, code, "authenticated, not allowed GET /metrics")
	code, body := get(token("e2e-scraper", true))
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "sidecarops_webhook_pod_decisions_total")
	assert.Regexp(t, `sidecarops_build_info\{commit="[^"]+",go_version="go1\.[^"]+",opa_version="v1\.[^"]+",version="[^"]+"\} 1`, body)

	plain, err := http.Get("http://" + metricsAddr + "/metrics")
	if err == nil {
		_ = plain.Body.Close()
		assert.NotEqual(t, http.StatusOK, plain.StatusCode, "no plain-HTTP metrics")
	}
}
