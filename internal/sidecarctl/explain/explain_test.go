package explain

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/installview"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/workspace"
)

// Two SidecarSets, one matching the pod, and the pod in a namespace the webhook sees and in one it
// never sees (labelled as a control plane, as the Namespace of the input says).
const input = `apiVersion: apps.kruise.io/v1beta1
kind: SidecarSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: web}}
  containers: [{name: agent, image: agent:1}]
---
apiVersion: apps.kruise.io/v1beta1
kind: SidecarSet
metadata: {name: batch}
spec:
  selector: {matchLabels: {app: batch}}
  containers: [{name: batch, image: batch:1}]
---
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec: {containers: [{name: web, image: web:1}]}
---
apiVersion: v1
kind: Namespace
metadata: {name: ops, labels: {control-plane: "true"}}
---
apiVersion: v1
kind: Pod
metadata: {name: hidden, namespace: ops, labels: {app: web}}
spec: {containers: [{name: web, image: web:1}]}
`

func TestWorkloads(t *testing.T) {
	var stderr bytes.Buffer
	w, err := workspace.Load(context.Background(), workspace.Options{Files: []string{manifest.Stdin}, Stdin: strings.NewReader(input),
		Reader: manifest.Reader{MaxDocumentBytes: manifest.DefaultMaxDocumentBytes, MaxInputBytes: manifest.DefaultMaxInputBytes}, Stderr: &stderr})
	require.NoError(t, err)
	v, err := installview.Default()
	require.NoError(t, err)
	v.Known(w.Namespaces, &stderr)

	var out bytes.Buffer
	assert.True(t, Workloads(context.Background(), &out, w, v, "apps", ""))
	lines := strings.Split(out.String(), "\n")
	assert.Equal(t, "Pod/web (namespace apps):", lines[0])
	assert.Equal(t, "  agent: matches", lines[1])
	assert.True(t, strings.HasPrefix(lines[2], "  batch: "), "the policy's reason it does not match")
	assert.NotEqual(t, "  batch: matches", lines[2])
	assert.Contains(t, out.String(), "Pod/hidden (namespace ops):\n  not seen by the webhook: ")
	assert.Contains(t, out.String(), "  agent: matches, but the webhook does not see the pod\n")
	require.NoError(t, w.Err())

	out.Reset()
	assert.True(t, Workloads(context.Background(), &out, w, v, "apps", "hidden"))
	assert.NotContains(t, out.String(), "Pod/web")
	assert.False(t, Workloads(context.Background(), &out, w, v, "apps", "nope"), "no workload of that name")
}
