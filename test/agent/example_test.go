package agent

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/sidecarops/sidecarops/agent"
	"github.com/sidecarops/sidecarops/agent/plugins"
	"github.com/sidecarops/sidecarops/api/v1beta1"
)

const example = "../../examples/sidecar-agent/"

func readYAML(t *testing.T, file string, into any) {
	t.Helper()
	data, err := os.ReadFile(example + file)
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(data, into))
}

// The example's config.yaml is valid for the agent as built, and says what the SidecarSet does:
// the agent's resources and its start before the app.
func TestExampleConfig(t *testing.T) {
	var cm corev1.ConfigMap
	readYAML(t, "configmap.yaml", &cm)
	cfg, err := agent.ParseConfig("config.yaml", []byte(cm.Data["config.yaml"]), plugins.Builtin())
	require.NoError(t, err)
	require.Len(t, cfg.Plugins, 2)
	assert.Equal(t, "hot_update", cfg.Plugins[0].Name, "bootOrder 0 first")

	var ss v1beta1.SidecarSet
	readYAML(t, "sidecarset.yaml", &ss)
	assert.Equal(t, v1beta1.NamespaceNamed("games"), ss.Spec.NamespaceSelector)
	c := ss.Spec.Containers[0]
	assert.Equal(t, v1beta1.BeforeAppContainerType, c.PodInjectPolicy)
	assert.Equal(t, "Before", cfg.SidecarStartOrder)
	assert.True(t, resource.MustParse(cfg.Resources.CPU).Equal(c.Resources.Limits[corev1.ResourceCPU]))
	assert.True(t, resource.MustParse(cfg.Resources.Memory).Equal(c.Resources.Limits[corev1.ResourceMemory]))
	assert.Equal(t, cm.Name, ss.Spec.Volumes[0].ConfigMap.Name)
}

// `sidecarctl inject` on the example puts the agent into the game server's pod.
func TestExampleInjection(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "sidecarctl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sidecarctl")
	build.Dir = "../.."
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/sidecarctl: %s", out)
	args := []string{"inject", "-o", "json", "--timestamp", "2026-01-02T03:04:05Z"}
	for _, f := range []string{"namespace.yaml", "configmap.yaml", "sidecarset.yaml", "deployment.yaml"} {
		args = append(args, "-f", "examples/sidecar-agent/"+f)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	require.NoError(t, err, "sidecarctl %s: %s", strings.Join(args, " "), stderr.String())

	var d appsv1.Deployment
	require.NoError(t, yaml.Unmarshal(out, &d))
	spec := d.Spec.Template.Spec
	require.Len(t, spec.Containers, 2)
	agentC, app := spec.Containers[0], spec.Containers[1]
	assert.Equal(t, "sidecar-agent", agentC.Name, "BeforeAppContainer")
	assert.Equal(t, "game-server", app.Name)
	assert.Equal(t, "sidecar-agent", d.Spec.Template.Annotations["kruise.io/sidecarset-injected-list"])
	env := map[string]string{}
	for _, e := range agentC.Env {
		if e.ValueFrom != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	assert.Equal(t, map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}, env)
	mounts := map[string]string{}
	for _, m := range agentC.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	assert.Equal(t, map[string]string{"sidecar-agent-config": "/etc/sidecar-agent", "game-config": "/var/game/config"}, mounts)
	vols := map[string]corev1.VolumeSource{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v.VolumeSource
	}
	require.Contains(t, vols, "sidecar-agent-config")
	assert.Equal(t, "sidecar-agent-config", vols["sidecar-agent-config"].ConfigMap.Name)
	require.Contains(t, vols, "game-config")
	assert.NotNil(t, vols["game-config"].EmptyDir)
	assert.Len(t, spec.Volumes, 2, "the pod's own game-config wins; the SidecarSet adds only its config volume")
	// What the agent needs from the workload.
	assert.Equal(t, "sidecar-agent", spec.ServiceAccountName)
	require.NotNil(t, spec.ShareProcessNamespace)
	assert.True(t, *spec.ShareProcessNamespace)
}

// `kubectl apply -k examples/sidecar-agent` installs the agent's RBAC from config/agent next to it.
func TestExampleInstallation(t *testing.T) {
	cmd := exec.Command("kubectl", "kustomize", example)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kubectl kustomize: %s", stderr.String())
	var kinds []string
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var obj struct {
			Kind     string
			Metadata struct{ Name, Namespace string }
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
		kinds = append(kinds, obj.Kind+"/"+obj.Metadata.Namespace+"/"+obj.Metadata.Name)
	}
	assert.ElementsMatch(t, []string{
		"Namespace//games", "ServiceAccount/games/sidecar-agent", "Role/games/sidecar-agent", "RoleBinding/games/sidecar-agent",
		"ClusterRole//sidecar-agent-token-review", "ClusterRoleBinding//sidecar-agent-token-review", "ClusterRole//sidecar-agent-hot-update",
		"ClusterRole//sidecar-agent-metrics-reader",
		"ConfigMap/games/sidecar-agent-config", "SidecarSet//sidecar-agent", "Deployment/games/game-server",
	}, kinds)
}
