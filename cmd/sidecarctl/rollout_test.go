package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/controller/rollout"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/rolloutplan"
)

const rolloutSidecarSet = `apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata:
  name: proxy
spec:
  selector:
    matchLabels:
      app: web
  updateStrategy:
    maxUnavailable: 2
  containers:
  - name: proxy
    image: example.com/proxy:%s
`

// storedPods injects n pods with the SidecarSet at image tag through `sidecarctl inject`, then
// gives them what the API server and the kubelet add: creation times (pod-i i seconds after
// the first, so a higher i is newer) and a Running, Ready status reporting the images.
func storedPods(t *testing.T, dir string, n int, tag string) []*corev1.Pod {
	t.Helper()
	var docs []string
	for i := range n {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: pod-%d\n  namespace: shop\n  labels:\n    app: web\nspec:\n  containers:\n  - name: app\n    image: example.com/app:1\n", i))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pods.yaml"), []byte(strings.Join(docs, "---\n")), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ss.yaml"), []byte(fmt.Sprintf(rolloutSidecarSet, tag)), 0o600))
	out, errOut, code := sidecarctl(t, "", "inject", "-f", dir, "--timestamp", ts)
	require.Equal(t, 0, code, errOut)
	var pods []*corev1.Pod
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, d := range strings.Split(out, "\n---\n") {
		p := &corev1.Pod{}
		require.NoError(t, yaml.Unmarshal([]byte(d), p))
		var i int
		_, err := fmt.Sscanf(p.Name, "pod-%d", &i)
		require.NoError(t, err)
		p.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(i) * time.Second))
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image + "-id", Ready: true})
		}
		pods = append(pods, p)
	}
	require.Len(t, pods, n)
	return pods
}

func writePods(t *testing.T, path string, pods []*corev1.Pod) {
	t.Helper()
	var docs []string
	for _, p := range pods {
		b, err := yaml.Marshal(p)
		require.NoError(t, err)
		docs = append(docs, string(b))
	}
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o600))
}

// TestRolloutPlanFromFiles: five pods injected at 1.0, the SidecarSet now at 2.0 with
// maxUnavailable 2; one pod was injected from a different non-image spec (not upgradable), one is
// already upgraded but the kubelet has not restarted it (it takes one slot).
func TestRolloutPlanFromFiles(t *testing.T) {
	dir := t.TempDir()
	pods := storedPods(t, dir, 5, "1.0")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ss.yaml"), []byte(fmt.Sprintf(rolloutSidecarSet, "2.0")), 0o600))

	// pod-0: not upgradable (its recorded without-image hash differs from the SidecarSet's).
	pods[0].Annotations[v1beta1.SidecarSetHashWithoutImageAnnotation] = `{"proxy":{"hash":"other","sidecarSetName":"proxy"}}`
	// pod-1: upgraded to 2.0 by the controller; its status still reports 1.0.
	withHash := upgradedTo(t, dir, pods[1])
	pods[1] = withHash
	writePods(t, filepath.Join(dir, "pods.yaml"), pods)

	out, errOut, code := sidecarctl(t, "", "rollout", "plan", "-f", dir)
	require.Equal(t, 0, code, errOut)
	// Candidates pod-2..4 newest first; one of the two slots is held by pod-1.
	for _, line := range []string{
		"SidecarSet proxy",
		": matched 5, updated 1, ready 4, updated and ready 0",
		"  partition 0, maxUnavailable 2 (1 taken by updated pods not yet ready)",
		"  upgrade now (1): shop/pod-4",
		"  held by maxUnavailable (2): shop/pod-3, shop/pod-2",
		"  not upgradable (1)\n    shop/pod-0: hash-without-image differs",
		// The Event the controller records for the round, as it words it.
		"  event NotUpgradablePods: SidecarSet in-place update detected 1 not upgradable pod(s) in this round, will skip them. First: shop/pod-0: hash-without-image differs",
		"  updated (1): shop/pod-1",
		"    1: shop/pod-4\n    2: shop/pod-3, shop/pod-2\n",
	} {
		assert.Contains(t, out, line)
	}
	assert.NotContains(t, out, "    3:", "pod-0 is never upgraded in place")

	out, errOut, code = sidecarctl(t, "", "rollout", "plan", "-f", dir, "proxy", "-o", "json")
	require.Equal(t, 0, code, errOut)
	var plans []rolloutplan.Plan
	require.NoError(t, json.Unmarshal([]byte(out), &plans))
	require.Len(t, plans, 1)
	assert.Equal(t, []string{"shop/pod-4"}, plans[0].Upgrade)
	assert.Equal(t, [][]string{{"shop/pod-4"}, {"shop/pod-3", "shop/pod-2"}}, plans[0].Rounds)
	assert.Equal(t, "shop/pod-0", plans[0].NotUpgradable[0].Pod)
	require.Len(t, plans[0].Events, 1)
	assert.Equal(t, rollout.ReasonNotUpgradablePods, plans[0].Events[0].Reason)

	// Paused: the same pods, nothing moves, and the plan says why.
	paused := strings.Replace(fmt.Sprintf(rolloutSidecarSet, "2.0"), "maxUnavailable: 2", "maxUnavailable: 2\n    paused: true", 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ss.yaml"), []byte(paused), 0o600))
	out, errOut, code = sidecarctl(t, "", "rollout", "plan", "-f", dir)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "  stopped: updateStrategy.paused\n")
	assert.Contains(t, out, "  upgrade now (0)\n")
	assert.Contains(t, out, "  held while stopped (3): shop/pod-4, shop/pod-3, shop/pod-2\n")
	assert.Contains(t, out, "    none\n")
	assert.NotContains(t, out, "  event ", "a stopped rollout records no Event")
}

// upgradedTo rewrites pod as the controller leaves it after upgrading it to the SidecarSet in
// dir/ss.yaml: `sidecarctl inject` of the same pod gives the new image and hash annotations.
func upgradedTo(t *testing.T, dir string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	fresh := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: shop\n  labels:\n    app: web\nspec:\n  containers:\n  - name: app\n    image: example.com/app:1\n", pod.Name)
	f := filepath.Join(t.TempDir(), "pod.yaml")
	require.NoError(t, os.WriteFile(f, []byte(fresh), 0o600))
	out, errOut, code := sidecarctl(t, "", "inject", "-f", filepath.Join(dir, "ss.yaml"), "-f", f, "--timestamp", ts)
	require.Equal(t, 0, code, errOut)
	injected := &corev1.Pod{}
	require.NoError(t, yaml.Unmarshal([]byte(out), injected))
	up := pod.DeepCopy()
	up.Spec = injected.Spec
	up.Annotations[v1beta1.SidecarSetHashAnnotation] = injected.Annotations[v1beta1.SidecarSetHashAnnotation]
	up.Annotations[v1beta1.SidecarSetInplaceUpdateStateAnnotation] = `{"proxy":{"revision":"x","updateTimestamp":null,"lastContainerStatuses":{"proxy":{"imageID":"example.com/proxy:1.0-id"}}}}`
	return up
}

func TestRolloutPlanBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"rollout", "plan", "-f", "examples/logging", "nope"}, 1, `SidecarSet "nope" is not in the files given`},
		{[]string{"rollout", "plan", "--kubeconfig", "/nonexistent"}, exitUsage, "give -f files, or the SidecarSet's name to read it from the cluster"},
		{[]string{"rollout", "plan", "--kubeconfig", "/nonexistent", "x"}, 1, "--kubeconfig /nonexistent"},
		{[]string{"rollout", "plan", "-f", "examples/logging", "--kubeconfig", "k", "x"}, exitUsage, "not both"},
		{[]string{"rollout", "plan", "-f", "examples/logging", "--context", "k", "x"}, exitUsage, "not both"},
		{[]string{"rollout", "plan", "-f", "examples/logging", "-o", "yaml"}, exitUsage, `--output: "yaml" is not text or json`},
		{[]string{"rollout", "plan", "-f", "examples/logging", "--rounds", "-1"}, exitUsage, "--rounds: -1 is negative"},
	} {
		_, errOut, code := sidecarctl(t, "", tc.args...)
		assert.Equal(t, tc.code, code, tc.args)
		assert.Contains(t, errOut, tc.want, tc.args)
	}
}
