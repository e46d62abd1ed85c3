package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// twoContexts is a kubeconfig with two clusters on ports where nothing listens, current context a.
const twoContexts = `apiVersion: v1
kind: Config
current-context: a
clusters:
- name: a
  cluster: {server: "https://127.0.0.1:1"}
- name: b
  cluster: {server: "https://127.0.0.1:2"}
users:
- name: u
  user: {token: t}
contexts:
- name: a
  context: {cluster: a, user: u}
- name: b
  context: {cluster: b, user: u}
`

// Issue 36 item 8: the cluster is chosen as kubectl chooses it: --kubeconfig, else $KUBECONFIG,
// else ~/.kube/config; --context, else the current context.
func TestClusterAsKubectlChoosesIt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config")
	require.NoError(t, os.WriteFile(path, []byte(twoContexts), 0o600))
	home := t.TempDir() // no ~/.kube/config: what is read is what the test gives
	t.Setenv("HOME", home)
	for _, tc := range []struct {
		name       string
		env        string
		flags      clusterFlags
		host, fail string
	}{
		{"--kubeconfig: its current context", "", clusterFlags{kubeconfig: path}, "https://127.0.0.1:1", ""},
		{"--kubeconfig --context", "", clusterFlags{kubeconfig: path, context: "b"}, "https://127.0.0.1:2", ""},
		{"$KUBECONFIG: its current context", path, clusterFlags{}, "https://127.0.0.1:1", ""},
		{"$KUBECONFIG and --context", path, clusterFlags{context: "b"}, "https://127.0.0.1:2", ""},
		{"--kubeconfig wins over $KUBECONFIG", filepath.Join(dir, "absent"), clusterFlags{kubeconfig: path, context: "b"}, "https://127.0.0.1:2", ""},
		{"a context the kubeconfig lacks", path, clusterFlags{context: "c"}, "", `the kubeconfig of $KUBECONFIG or ~/.kube/config --context c: context "c" does not exist`},
		{"no kubeconfig anywhere", "", clusterFlags{}, "", "the kubeconfig of $KUBECONFIG or ~/.kube/config: invalid configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			cfg, err := tc.flags.restConfig()
			if tc.fail != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.fail)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.host, cfg.Host)
		})
	}

	// Through a command: rollout plan reads the cluster of --context, from $KUBECONFIG.
	t.Setenv("KUBECONFIG", path)
	_, errOut, code := sidecarctl(t, "", "rollout", "plan", "--context", "b", "proxy")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "127.0.0.1:2")
	assert.NotContains(t, errOut, "127.0.0.1:1")
}
