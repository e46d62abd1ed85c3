package governance

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/webhook"
)

// What examples/policies/sidecarsets and its data.json name.
const (
	tenantGroupPrefix  = "tenant:"
	teamLabel          = "team"
	adminGroup         = "platform-admins"
	approvalAnnotation = "sidecarops.io/approved-blast-radius"
	privilegedOptIn    = "sidecarops.io/privileged-sidecars"
	registry           = "registry.example.com/"
)

// sidecarSet is a SidecarSet the examples admit on its own account: an image of the allowed registry,
// resources set, nothing privileged, scoped to the namespaces labelled team=team.
func sidecarSet(name, team string) *v1beta1.SidecarSet {
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	ss := &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{
				Name: "proxy", Image: registry + "proxy:1.0",
				Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true),
					Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
			}}},
		},
	}
	if team != "" {
		ss.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{teamLabel: team}}
	}
	return ss
}

func forbidden(t *testing.T, err error, says ...string) {
	t.Helper()
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "403 Forbidden, got %v", err)
	for _, s := range says {
		assert.Contains(t, err.Error(), s)
	}
}

// A tenant may create SidecarSets for its own namespaces only, although RBAC lets it write any: the
// policy reads which namespaces the selector actually selects.
func TestTenantsStayInTheirNamespaces(t *testing.T) {
	createNamespace(t, "shop", map[string]string{teamLabel: "shop"})
	createNamespace(t, "bank", map[string]string{teamLabel: "bank"})
	mayWriteSidecarSets(t, tenantGroupPrefix+"shop")
	alice, _ := as(t, "alice", tenantGroupPrefix+"shop")

	own := sidecarSet("shop-mesh", "shop")
	require.NoError(t, alice.Create(ctx(t), own), "a SidecarSet for alice's own team's namespaces")
	t.Cleanup(func() { _ = cluster.Client.Delete(ctx(t), own) })

	err := alice.Create(ctx(t), sidecarSet("bank-mesh", "bank"))
	forbidden(t, err, `sidecarsets.apps.kruise.io "bank-mesh" is forbidden`, "bank")

	// The controller writes the SidecarSet's status meanwhile: an update may meet a newer version.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		widened := &v1beta1.SidecarSet{}
		require.NoError(t, alice.Get(ctx(t), client.ObjectKeyFromObject(own), widened))
		widened.Spec.NamespaceSelector = nil
		return alice.Update(ctx(t), widened)
	})
	forbidden(t, err, "shop-mesh")
}

// Selecting every namespace needs the approval annotation, whoever asks.
func TestBlastRadiusNeedsApproval(t *testing.T) {
	mayWriteSidecarSets(t, adminGroup)
	admin, _ := as(t, "root", adminGroup)
	everywhere := sidecarSet("everywhere", "")
	forbidden(t, admin.Create(ctx(t), everywhere.DeepCopy()), "everywhere", approvalAnnotation)

	everywhere.Annotations = map[string]string{approvalAnnotation: "CHG-1234"}
	require.NoError(t, admin.Create(ctx(t), everywhere), "approved")
	t.Cleanup(func() { _ = cluster.Client.Delete(ctx(t), everywhere) })
}

// A privileged sidecar selecting a namespace that enforces restricted is admitted with a warning that
// names the namespace and the checks; a pod there that passes restricted on its own is refused by
// Pod Security once injected, and gets our warning and an Event on the SidecarSet naming the check.
func TestPodSecurityImpactIsVisible(t *testing.T) {
	createNamespace(t, "vault", map[string]string{teamLabel: "vault", privilegedOptIn: "allowed",
		"pod-security.kubernetes.io/enforce": "restricted"})
	mayWriteSidecarSets(t, adminGroup)
	admin, warned := as(t, "root", adminGroup)

	ss := sidecarSet("vault-agent", "vault")
	ss.Spec.Selector.MatchLabels = map[string]string{"app": "vault"}
	ss.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	require.NoError(t, admin.Create(ctx(t), ss))
	t.Cleanup(func() { _ = cluster.Client.Delete(ctx(t), ss) })
	assert.Contains(t, strings.Join(warned.take(), "\n"),
		`sidecarops: SidecarSet vault-agent: its sidecars violate PodSecurity "restricted:latest" of namespace vault, which refuses the pods it injects into there: privileged (container "proxy" must not set securityContext.privileged=true)`)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "vault", Name: "vault-0", Labels: map[string]string{"app": "vault"}},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1.0", SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		},
	}
	// The manager compiles the new SidecarSet asynchronously: wait until pods there get it.
	owner, warned := as(t, "")
	eventually(t, "the pod is injected, and refused by Pod Security", func() error {
		err := owner.Create(ctx(t), pod.DeepCopy())
		if err == nil || !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) {
			return fmt.Errorf("want Pod Security's refusal, got %w", err)
		}
		return nil
	})
	warnings := strings.Join(warned.take(), "\n")
	assert.Contains(t, warnings, `sidecarops: injecting SidecarSet vault-agent makes the pod violate PodSecurity "restricted:latest": privileged (container "proxy" must not set securityContext.privileged=true)`)

	eventually(t, "an Event on the SidecarSet names the check", func() error {
		var events eventsv1.EventList
		if err := cluster.Client.List(ctx(t), &events); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == webhook.PodSecurityViolationReason && e.Regarding.Name == "vault-agent" && strings.Contains(e.Note, "privileged") {
				return nil
			}
		}
		return fmt.Errorf("no %s Event on SidecarSet vault-agent among %d", webhook.PodSecurityViolationReason, len(events.Items))
	})
}
