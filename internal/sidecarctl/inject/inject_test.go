package inject

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/installview"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/workspace"
)

// input is a SidecarSet, a Deployment it matches in namespace apps, the same in the manager's
// namespace (which the webhook never sees), and a Service, a kind sidecarctl does not read, which
// passes through.
const input = `apiVersion: apps.kruise.io/v1beta1
kind: SidecarSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: web}}
  containers: [{name: agent, image: agent:1}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: apps}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: web:1}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: sidecarops-system}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: web:1}]}
---
apiVersion: v1
kind: Service
metadata: {name: web}
`

func load(t *testing.T) (*workspace.Workspace, *installview.View) {
	t.Helper()
	var stderr bytes.Buffer
	w, err := workspace.Load(context.Background(), workspace.Options{Files: []string{manifest.Stdin}, Stdin: strings.NewReader(input),
		Reader: manifest.Reader{MaxDocumentBytes: manifest.DefaultMaxDocumentBytes, MaxInputBytes: manifest.DefaultMaxInputBytes}, Stderr: &stderr})
	require.NoError(t, err)
	require.NoError(t, w.Err())
	// The chart's values (none given) in namespace sidecarops-system, which its webhook leaves out by
	// name.
	values := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(values, nil, 0o600))
	v, err := installview.FromValues(values, "sidecarops-system")
	require.NoError(t, err)
	v.Known(w.Namespaces, &stderr)
	return w, v
}

func TestWorkloads(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

	w, v := load(t)
	var notes bytes.Buffer
	res := Workloads(context.Background(), w, Options{Namespace: "default", Now: now, View: v, Notes: &notes})
	require.Len(t, res.Objects, 3, "both Deployments and the Service, in input order")
	assert.Nil(t, res.Patches)
	seen, unseen := res.Objects[0].(*appsv1.Deployment), res.Objects[1].(*appsv1.Deployment)
	assert.Equal(t, []string{"agent", "web"}, []string{seen.Spec.Template.Spec.Containers[0].Name, seen.Spec.Template.Spec.Containers[1].Name})
	assert.Len(t, unseen.Spec.Template.Spec.Containers, 1, "created as written")
	assert.Contains(t, notes.String(), "(Deployment/web): not injected: not seen by the webhook")
	assert.Equal(t, 1, strings.Count(notes.String(), "not injected"))

	w, v = load(t)
	res = Workloads(context.Background(), w, Options{Namespace: "default", Now: now, View: v, Notes: &notes, Patch: true})
	assert.Nil(t, res.Objects, "the patches stand for the workloads; the Service has none")
	require.Len(t, res.Patches, 2)
	assert.Equal(t, "apps", res.Patches[0].Namespace)
	require.NotEmpty(t, res.Patches[0].Patch)
	for _, op := range res.Patches[0].Patch {
		assert.True(t, strings.HasPrefix(op.Path, "/spec/template/"), "%s leads into the pod template", op.Path)
	}
	assert.Empty(t, res.Patches[1].Patch, "nothing for the pods the webhook never sees")

	var out bytes.Buffer
	require.NoError(t, WritePatches(&out, manifest.JSON, nil))
	assert.Equal(t, "[]\n", out.String(), "a list always")
}
