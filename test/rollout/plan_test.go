package rollout

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// TestRolloutPlanLive: `sidecarctl rollout plan --kubeconfig` reads a rollout held by partition
// from the cluster and says so, with the same numbers the controller wrote into status.
func TestRolloutPlanLive(t *testing.T) {
	bin := buildCommand(t, "sidecarctl")

	const n = 3
	f := newFleet(t, "plan", n, func(ss *v1beta1.SidecarSet) {
		ss.Spec.UpdateStrategy.MaxUnavailable = ptrIntStr(intstr.FromString("100%"))
		ss.Spec.UpdateStrategy.Partition = ptrIntStr(intstr.FromInt32(n - 1))
	}, nil)
	f.update(func(ss *v1beta1.SidecarSet) { ss.Spec.Containers[0].Image = image("2") })
	st := f.waitStatus(counts{n, 1, n, 1})

	out, err := exec.Command(bin, "rollout", "plan", "--kubeconfig", cluster.Kubeconfig, "plan", "-o", "json").CombinedOutput()
	require.NoError(t, err, "%s", out)
	var plans []struct {
		LatestRevision string                   `json:"latestRevision"`
		Status         v1beta1.SidecarSetStatus `json:"status"`
		Upgrade        []string                 `json:"upgrade"`
		HeldBy         map[string][]string      `json:"heldBy"`
		Updated        []string                 `json:"updated"`
		Rounds         [][]string               `json:"rounds"`
	}
	require.NoError(t, json.Unmarshal(out, &plans), "%s", out)
	require.Len(t, plans, 1)
	p := plans[0]
	assert.Equal(t, st.LatestRevision, p.LatestRevision)
	assert.Equal(t, counts{n, 1, n, 1}, statusCounts(p.Status), "the plan's status is the controller's")
	assert.Empty(t, p.Upgrade)
	assert.Empty(t, p.Rounds, "partition holds the rest for good")
	require.Len(t, p.Updated, 1)
	assert.Len(t, p.HeldBy["partition"], n-1)
	assert.Equal(t, image("2"), f.images(sidecar)[filepath.Base(p.Updated[0])], "the pod the plan calls updated runs the new image")
}
