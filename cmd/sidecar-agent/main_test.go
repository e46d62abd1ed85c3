package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/sidecarops/sidecarops/internal/testing/reviewserver"
)

// agentBinary builds the command as it ships.
func agentBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sidecar-agent")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func TestCommand(t *testing.T) {
	bin := agentBinary(t)
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
		return p
	}
	good := write("good.yaml", "plugins:\n  - name: hot_update\n    config: {fileDir: "+filepath.Join(dir, "files")+
		", signal: {processName: game, signalName: SIGHUP}, storageConfig: {type: InKube, inKube: {annotationKey: example.com/r}}}\n")
	bad := write("bad.yaml", "plugins:\n  - name: http_probe\n    config: {endpoints: [{url: localhost, storageConfig: {type: InKube, inKube: {annotationKey: a}}}]}\n")

	t.Run("SIGTERM stops it gracefully", func(t *testing.T) {
		addr := freeAddr(t)
		var stderr bytes.Buffer
		cmd := exec.Command(bin, "--config", good, "--addr", addr, "--no-kube")
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		require.Eventually(t, func() bool {
			resp, err := http.Get("http://" + addr + "/healthz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		}, 2*time.Minute, 20*time.Millisecond)

		// Without the Kubernetes API nobody can be authenticated: the API is closed, not open
		// (before, anyone reaching the port could read it and drive hot_update).
		for _, r := range []struct{ method, path string }{
			{"GET", "/status"}, {"GET", "/metrics"}, {"POST", "/plugins/hot_update/update"}, {"GET", "/plugins/hot_update/result"},
		} {
			req, err := http.NewRequest(r.method, "http://"+addr+r.path, strings.NewReader(`{"url": "http://127.0.0.1:1/x.cfg", "version": "v2"}`))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer anything")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, r.path)
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			require.NoError(t, err, stderr.String())
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			t.Fatal("the agent did not exit after SIGTERM")
		}
		assert.Contains(t, stderr.String(), `"msg":"agent stopping"`)
	})

	tests := []struct {
		name string
		args []string
		env  []string
		code int
		err  string
	}{
		{"invalid config", []string{"--config", bad, "--no-kube"}, nil, 1,
			"sidecar-agent: " + bad + `: plugin http_probe: plugins[0].config.endpoints[0].url: Invalid value: "localhost": must be an absolute http:// or https:// URL`},
		{"missing config", []string{"--config", filepath.Join(dir, "none.yaml"), "--no-kube"}, nil, 1, "no such file or directory"},
		{"no pod identity", []string{"--config", good}, []string{"POD_NAME="}, 1, "POD_NAME and POD_NAMESPACE must be set"},
		{"no cluster", []string{"--config", good}, []string{"POD_NAME=p", "POD_NAMESPACE=n", "KUBERNETES_SERVICE_HOST="}, 1, "sidecar-agent: building the Kubernetes client:"},
		{"bad flag", []string{"--nope"}, nil, 2, "flag provided but not defined: -nope"},
		{"no resource to authorise on", []string{"--authz-resource", ".sidecarops.io", "--no-kube"}, nil, 2, "invalid value \".sidecarops.io\" for flag -authz-resource"},
		{"no reviews allowed", []string{"--review-rate", "0", "--no-kube"}, nil, 2, "invalid value 0 for flag -review-rate: must be a positive number"},
		{"reviews unbounded", []string{"--review-known-rate", "Inf", "--no-kube"}, nil, 2, "invalid value +Inf for flag -review-known-rate: must be a positive number"},
		{"a negative burst", []string{"--review-source-burst=-1", "--no-kube"}, nil, 2, "invalid value -1 for flag -review-source-burst: must be positive"},
		{"a rate not a number", []string{"--review-reserved-rate", "fast", "--no-kube"}, nil, 2, `invalid value "fast" for flag -review-reserved-rate: parse error`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin, append(tt.args, "--addr", freeAddr(t))...)
			cmd.Env = append(os.Environ(), tt.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit)
			assert.Equal(t, tt.code, exit.ExitCode())
			assert.Contains(t, strings.TrimSpace(stderr.String()), tt.err)
		})
	}
}

// The API listens on loopback unless told otherwise: before, it listened on every interface.
func TestDefaults(t *testing.T) {
	cmd := exec.Command(agentBinary(t), "--help")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run())
	for _, want := range []string{`(default "127.0.0.1:5000")`, `(default "sidecar-agent")`, `(default "sidecaragents.sidecarops.io")`} {
		assert.Contains(t, stderr.String(), want)
	}
	// The limits of reviews are kubeauth's defaults, documented in docs/agent.md.
	for flag, want := range map[string]string{
		"review-source-rate": "1", "review-source-burst": "10", "review-rate": "5", "review-burst": "20",
		"review-reserved-rate": "2", "review-reserved-burst": "10", "review-known-rate": "2", "review-known-burst": "10",
	} {
		assert.Regexp(t, `(?m)^  -`+flag+` (float|int)\n.*\(default `+want+`\)$`, stderr.String())
	}
}

// The flags of the review limits reach the agent's reviewer: a second made-up token from one address
// is answered 429 once --review-source-burst=1 is spent, 401 with the default of ten.
func TestReviewLimitFlags(t *testing.T) {
	bin := agentBinary(t)
	api := httptest.NewServer((&reviewserver.Server{Allow: func(string, authzv1.SubjectAccessReviewSpec) bool { return false }}).Handler())
	defer api.Close()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: api.URL}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": {Token: "agent"}},
		Contexts:       map[string]*clientcmdapi.Context{"c": {Cluster: "c", AuthInfo: "u"}},
		CurrentContext: "c",
	}, kubeconfig))
	config := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(config, []byte("plugins: []\n"), 0o644))
	tests := []struct {
		name  string
		args  []string
		codes []int
	}{
		{"defaults", nil, []int{http.StatusUnauthorized, http.StatusUnauthorized}},
		{"one review per source at once", []string{"--review-source-burst", "1", "--review-source-rate", "0.01"}, []int{http.StatusUnauthorized, http.StatusTooManyRequests}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := freeAddr(t)
			cmd := exec.Command(bin, append([]string{"--config", config, "--kubeconfig", kubeconfig, "--addr", addr}, tt.args...)...)
			cmd.Env = append(os.Environ(), "POD_NAME=game-0", "POD_NAMESPACE=games")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start())
			defer func() {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				_ = cmd.Wait()
			}()
			require.Eventually(t, func() bool {
				resp, err := http.Get("http://" + addr + "/healthz")
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK
			}, 2*time.Minute, 20*time.Millisecond, "%s", &stderr)
			var codes []int
			for i := range tt.codes {
				req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/status", nil)
				require.NoError(t, err)
				req.Header.Set("Authorization", fmt.Sprintf("Bearer made-up-%d", i))
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				resp.Body.Close()
				codes = append(codes, resp.StatusCode)
			}
			assert.Equal(t, tt.codes, codes, "%s", &stderr)
		})
	}
}

// --version prints what the build stamped (make build passes the tag and commit with -ldflags -X).
func TestVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "sidecar-agent")
	pkg := "github.com/sidecarops/sidecarops/internal/version"
	build := exec.Command("go", "build", "-ldflags", "-X "+pkg+".Version=v1.2.3 -X "+pkg+".Commit=0a1b2c3", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	out, err = exec.Command(bin, "--version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Regexp(t, `^sidecar-agent v1\.2\.3 \(commit 0a1b2c3, go1\.\d+[^,]*, OPA v1\.\d+\.\d+\)\n$`, string(out))
}
