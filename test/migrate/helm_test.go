package migrate

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/internal/testing/render"
)

// The CRDs of testdata/kruise-like: its "SidecarSet" CRD, which sidecarops' release adopts, and
// one of its other workloads.
const (
	likeSidecarSets = "sidecarsets.kruise-like.example.com"
	likeCloneSets   = "clonesets.kruise-like.example.com"
)

// TestKruiseReleaseEndStates runs docs/migration.md's Helm steps for OpenKruise's release, with the
// pinned Helm, on a chart built as OpenKruise's is (testdata/kruise-like): what each path leaves of
// OpenKruise's CRDs and namespace, and why the steps are what they are. Path B has no such step: its
// release, CRDs included, stays as it is.
func TestKruiseReleaseEndStates(t *testing.T) {
	if os.Getenv("SIDECAROPS_HELM") == "" {
		t.Skip("SIDECAROPS_HELM is not set: run through `make test`, which builds the pinned helm")
	}
	home := t.TempDir()
	helm := func(args ...string) (string, error) {
		out, err := render.Helm(home, append(args, "--kubeconfig", cluster.Kubeconfig)...)
		return string(out), err
	}
	kubectl := func(t *testing.T, args ...string) {
		out, err := exec.Command("kubectl", append(args, "--kubeconfig", cluster.Kubeconfig)...).CombinedOutput() // #nosec G204 -- docs/migration.md's commands
		require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), out)
	}
	install := func(t *testing.T, release, ns string) {
		_, err := helm("install", release, "testdata/kruise-like", "--set", "installation.namespace="+ns)
		require.NoError(t, err)
		t.Cleanup(func() {
			_, _ = helm("uninstall", release)
			for _, crd := range []string{likeSidecarSets, likeCloneSets} {
				_ = cluster.Client.Delete(ctx(t), crdObject(crd))
			}
			// The next install creates them again, which needs them gone, not only deleted.
			eventuallyWithin(t, 3*time.Minute, "the CRDs are gone", func() error { return gone(likeSidecarSets, likeCloneSets) })
		})
	}
	// Step 4 of docs/migration.md (path A): sidecarops' release adopts the SidecarSet CRD. Path B
	// leaves OpenKruise's release as it is.
	adopt := func(t *testing.T) {
		kubectl(t, "label", "crd", likeSidecarSets, "app.kubernetes.io/managed-by=Helm", "--overwrite")
		kubectl(t, "annotate", "crd", likeSidecarSets, "--overwrite", "meta.helm.sh/release-name=sidecarops", "meta.helm.sh/release-namespace=sidecarops-system")
	}

	t.Run("path A: the CRD and the namespace leave the release before it is uninstalled", func(t *testing.T) {
		install(t, "kruise-a", "kruise-like-a")
		adopt(t)
		kubectl(t, "annotate", "crd", likeSidecarSets, "helm.sh/resource-policy=keep")
		kubectl(t, "annotate", "namespace", "kruise-like-a", "helm.sh/resource-policy=keep")
		_, err := helm("upgrade", "kruise-a", "testdata/kruise-like", "--reuse-values", "--set", "crds.managed=false", "--set", "installation.createNamespace=false")
		require.NoError(t, err)
		manifest, err := helm("get", "manifest", "kruise-a")
		require.NoError(t, err)
		assert.NotRegexp(t, `(?m)^kind: (CustomResourceDefinition|Namespace)$`, manifest)
		_, err = helm("uninstall", "kruise-a")
		require.NoError(t, err)

		assert.NoError(t, present(likeSidecarSets), "the SidecarSet CRD stays")
		eventually(t, "OpenKruise's unused CRDs go", func() error { return deleted(likeCloneSets) })
		var ns corev1.Namespace
		require.NoError(t, cluster.Client.Get(ctx(t), client.ObjectKey{Name: "kruise-like-a"}, &ns))
		assert.Nil(t, ns.DeletionTimestamp, "kruise-system stays, with the revisions")
		var cm corev1.ConfigMap
		assert.True(t, apierrors.IsNotFound(cluster.Client.Get(ctx(t), client.ObjectKey{Namespace: "kruise-like-a", Name: "manager"}, &cm)), "the rest of OpenKruise goes")
	})

	t.Run("a keep annotation on the live CRD does not survive helm uninstall", func(t *testing.T) {
		install(t, "kruise-c", "kruise-like-c")
		kubectl(t, "annotate", "crd", likeSidecarSets, "helm.sh/resource-policy=keep")
		_, err := helm("uninstall", "kruise-c")
		require.NoError(t, err)
		eventually(t, "the CRD goes with the release", func() error { return deleted(likeSidecarSets) })
	})
}

func crdObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apiextensions.k8s.io/v1")
	u.SetKind("CustomResourceDefinition")
	u.SetName(name)
	return u
}

// present says nil when CRD name is there and not being deleted.
func present(name string) error {
	u := crdObject(name)
	if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(u), u); err != nil {
		return err
	}
	if u.GetDeletionTimestamp() != nil {
		return fmt.Errorf("%s is being deleted", name)
	}
	return nil
}

// gone says nil when none of the CRDs names is there.
func gone(names ...string) error { return crdsAre(false, names) }

// deleted says nil when each of the CRDs names is gone or being deleted: what Helm does. The API
// server's finalizer then removes each in its own time (seconds; once over 90 under a loaded CI
// machine's parallel suites).
func deleted(names ...string) error { return crdsAre(true, names) }

func crdsAre(deleting bool, names []string) error {
	for _, name := range names {
		u := crdObject(name)
		err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(u), u)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		if deleting && u.GetDeletionTimestamp() != nil {
			continue
		}
		conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		return fmt.Errorf("%s is still there (deletionTimestamp %v, finalizers %v, conditions %v)", name, u.GetDeletionTimestamp(), u.GetFinalizers(), conditions)
	}
	return nil
}
