package install

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// container is a Deployment's container run as a process on this machine, as a kubelet would run
// it: its args and env resolved, its volumes projected into directories. What a process cannot
// share with a Pod is mapped, and only that: mount paths become directories under a temporary root
// (the arguments naming them are rewritten), and the listening ports, which a Pod has in a network
// namespace of its own, move to free ones on the host's address (the EndpointSlice says so, as the
// endpoints controller would say the pod's).
type container struct {
	cmd     *exec.Cmd
	log     string
	exited  chan struct{} // closed when the process has exited
	stop    context.CancelFunc
	webhook int    // the port the webhook server listens on
	probe   string // host:port of /readyz
}

// runContainer starts bin as the first container of d's pod template. kubeconfig is how the
// process reaches the API server (in a cluster: the ServiceAccount's token, here the same identity
// by impersonation). Volumes are kept in step with their Secrets and ConfigMaps until the test ends.
func runContainer(t *testing.T, c client.Client, d *appsv1.Deployment, bin, kubeconfig, hostIP string) *container {
	t.Helper()
	spec := d.Spec.Template.Spec
	ctr := spec.Containers[0]
	root := t.TempDir()
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)

	mounts := map[string]string{} // mount path → directory
	for _, m := range ctr.VolumeMounts {
		dir := filepath.Join(root, strings.ReplaceAll(strings.Trim(m.MountPath, "/"), "/", "_"))
		require.NoError(t, os.MkdirAll(dir, 0o700))
		mounts[m.MountPath] = dir
		vol := volume(t, spec, m.Name)
		switch {
		case vol.EmptyDir != nil:
		case vol.Secret != nil:
			project(ctx, t, c, d.Namespace, vol.Secret.SecretName, &corev1.Secret{}, dir)
		case vol.ConfigMap != nil:
			project(ctx, t, c, d.Namespace, vol.ConfigMap.Name, &corev1.ConfigMap{}, dir)
		default:
			t.Fatalf("volume %s: only emptyDir, secret and configMap volumes are played", vol.Name)
		}
	}
	args := make([]string, 0, len(ctr.Args)+4)
	for _, a := range ctr.Args {
		for path, dir := range mounts {
			if name, value, ok := strings.Cut(a, "="); ok && (value == path || strings.HasPrefix(value, path+"/")) {
				a = name + "=" + dir + strings.TrimPrefix(value, path)
			}
		}
		args = append(args, a)
	}
	p := &container{exited: make(chan struct{}), stop: stop, webhook: freePort(t, hostIP), probe: net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t, "127.0.0.1")))}
	// The flag package takes the last of repeated flags: these replace the ports the manifest gives.
	args = append(args, "--webhook-host="+hostIP, "--webhook-port="+strconv.Itoa(p.webhook),
		"--health-probe-bind-address="+p.probe, "--metrics-bind-address=127.0.0.1:"+strconv.Itoa(freePort(t, "127.0.0.1")))

	env := []string{"KUBECONFIG=" + kubeconfig}
	for _, e := range ctr.Env {
		env = append(env, e.Name+"="+envValue(t, d, ctr, e))
	}
	log, err := os.CreateTemp(root, "manager-*.log")
	require.NoError(t, err)
	p.log = log.Name()
	p.cmd = exec.Command(bin, args...) // #nosec G204 -- the repository's manager with its manifest's arguments
	p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr = env, log, log
	require.NoError(t, p.cmd.Start())
	go func() { _ = p.cmd.Wait(); _ = log.Close(); close(p.exited) }()
	t.Cleanup(func() { p.terminate(t) })
	p.waitReady(t)
	return p
}

func volume(t *testing.T, spec corev1.PodSpec, name string) corev1.Volume {
	t.Helper()
	for _, v := range spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("volume mount %s names no volume", name)
	return corev1.Volume{}
}

// envValue resolves an environment variable as the kubelet does for the downward API fields the
// manifests use; anything else fails the test rather than being guessed.
func envValue(t *testing.T, d *appsv1.Deployment, ctr corev1.Container, e corev1.EnvVar) string {
	t.Helper()
	switch {
	case e.ValueFrom == nil:
		return e.Value
	case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
		return d.Namespace
	case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
		return d.Name + "-0"
	case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.uid":
		return "uid-of-" + d.Name + "-0" // the played pod is no object: its UID only has to be stable
	case e.ValueFrom.ResourceFieldRef != nil && e.ValueFrom.ResourceFieldRef.Resource == "limits.memory":
		limit := ctr.Resources.Limits.Memory()
		require.False(t, limit.IsZero(), "%s: limits.memory without a memory limit (the node's allocatable memory)", e.Name)
		return strconv.FormatInt(limit.Value(), 10)
	}
	t.Fatalf("env %s: a source this test does not play", e.Name)
	return ""
}

// project writes the keys of a Secret or ConfigMap as files into dir, and rewrites them whenever
// the object changes, as the kubelet keeps a mounted volume in step (atomically: a reader never
// sees half a file).
func project(ctx context.Context, t *testing.T, c client.Client, ns, name string, obj client.Object, dir string) {
	t.Helper()
	sync := func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
			return err
		}
		files := map[string][]byte{}
		switch o := obj.(type) {
		case *corev1.Secret:
			files = o.Data
		case *corev1.ConfigMap:
			for k, v := range o.Data {
				files[k] = []byte(v)
			}
		}
		for k, v := range files {
			path := filepath.Join(dir, k)
			if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, v) {
				continue
			}
			if err := os.WriteFile(path+".tmp", v, 0o600); err != nil {
				return err
			}
			if err := os.Rename(path+".tmp", path); err != nil {
				return err
			}
		}
		return nil
	}
	require.NoError(t, sync(), "volume of %s/%s", ns, name)
	go func() {
		for ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			_ = sync() // the kubelet retries too; the test sees the effect (or its absence)
		}
	}()
}

func (p *container) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			t.Fatalf("the manager exited before it was ready (%s)\n%s", p.cmd.ProcessState, tail(p.log))
		default:
		}
		if resp, err := http.Get("http://" + p.probe + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the manager was not ready after 2 minutes\n%s", tail(p.log))
}

// terminate stops the process as the kubelet stops a container (SIGTERM) and waits for it; once
// it has exited, terminate returns at once.
func (p *container) terminate(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(45 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Errorf("the manager did not stop within its termination grace period\n%s", tail(p.log))
	}
	p.stop()
}

// endpoints publishes the process as the Service's one ready endpoint, as the endpoints controller
// would publish a ready pod.
func (p *container) endpoints(ctx context.Context, t *testing.T, c client.Client, svc *corev1.Service, hostIP string) {
	t.Helper()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: svc.Namespace, Name: svc.Name + "-test",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	require.NoError(t, client.IgnoreNotFound(c.Delete(ctx, slice)))
	slice.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{hostIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}
	for _, sp := range svc.Spec.Ports {
		slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{Name: ptr.To(sp.Name), Port: ptr.To(int32(p.webhook)), Protocol: ptr.To(corev1.ProtocolTCP)})
	}
	require.NoError(t, c.Create(ctx, slice))

	// The oldest API servers the manifests support (1.30, make test-k8s-versions) resolve a
	// Service by its Endpoints, which the endpoints controller would keep beside the slice.
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name}} //nolint:staticcheck // SA1019: what those API servers read
	require.NoError(t, client.IgnoreNotFound(c.Delete(ctx, ep)))
	subset := corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{{IP: hostIP}}} //nolint:staticcheck // SA1019: as above
	for _, sp := range svc.Spec.Ports {
		subset.Ports = append(subset.Ports, corev1.EndpointPort{Name: sp.Name, Port: int32(p.webhook), Protocol: corev1.ProtocolTCP})
	}
	ep.Subsets = []corev1.EndpointSubset{subset} //nolint:staticcheck // SA1019: as above
	require.NoError(t, c.Create(ctx, ep))
}

// impersonating writes a kubeconfig that acts as the ServiceAccount (the envtest admin's
// credentials, impersonating it): the manager gets exactly the rights the chart's RBAC grants.
func impersonating(t *testing.T, admin []byte, ns, sa string) string {
	t.Helper()
	cfg, err := clientcmd.Load(admin)
	require.NoError(t, err)
	for _, a := range cfg.AuthInfos {
		a.Impersonate = fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa)
		a.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

func freePort(t *testing.T, host string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// hostIP is an address of this machine the API server can dial and an EndpointSlice may hold
// (not loopback or link-local, which the API refuses for endpoints).
func hostIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	t.Fatal("this machine has no non-loopback IPv4 address for the webhook's endpoint")
	return ""
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}
