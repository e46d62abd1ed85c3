package governance

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.NoError(c, f(), what) }, 30*time.Second, 100*time.Millisecond, what)
}

// warnings keeps the warnings the API server returned to a client.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

// take returns the warnings since the last take.
func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

// as is a client that impersonates user in groups (the cluster's administrator when user is ""),
// and the warnings it receives.
func as(t *testing.T, user string, groups ...string) (client.Client, *warnings) {
	t.Helper()
	cfg := rest.CopyConfig(cluster.Config)
	if user != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	}
	w := &warnings{}
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: cluster.Client.Scheme()})
	require.NoError(t, err)
	return c, w
}

// createNamespace creates a namespace once per suite: envtest runs no namespace controller, so a
// namespace is never deleted, and a test run again (-count) finds it there.
func createNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	err := cluster.Client.Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// mayWriteSidecarSets lets group write SidecarSets: RBAC's part, which says nothing of what or where.
func mayWriteSidecarSets(t *testing.T, group string) {
	t.Helper()
	name := "sidecarset-writers-" + group
	create := func(o client.Object) {
		if err := cluster.Client.Create(ctx(t), o); !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	create(&rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apps.kruise.io"}, Resources: []string{"sidecarsets"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	})
	create(&rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: group}},
	})
}
