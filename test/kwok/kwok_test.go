package kwok

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/internal/testing/kwok"
	"github.com/sidecarops/sidecarops/manager"
)

// timeout bounds every wait on kwok; its stages play within milliseconds of the watch event.
const timeout = 30 * time.Second

const (
	appImage        = "example.com/app:1.0"
	sidecarImage    = "example.com/sidecar:1.0"
	sidecarImageNew = "example.com/sidecar:2.0"
)

func TestKwokRunsPodsAndReportsInPlaceImageChange(t *testing.T) {
	// Checked before the control plane starts, so a missing binary costs no API server boot and
	// says what to do.
	bin, err := kwok.BinaryPath()
	require.NoError(t, err)
	if st, err := os.Stat(bin); err != nil || st.IsDir() {
		t.Fatalf("kwok binary missing at %s: build it with hack/kwok-bin.sh (or point KWOK_BIN at one)", bin)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// No bundles: the manager only has to serve its webhooks, so Pod creates and updates pass
	// through the admission path they will take once the controller exists.
	c, err := devcluster.Start(ctx, devcluster.Options{Root: "../..", Manager: manager.Options{Debounce: 50 * time.Millisecond}})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Stop()) }()

	k, err := kwok.Start(ctx, kwok.Options{Binary: bin, KubeconfigPath: c.Kubeconfig})
	require.NoError(t, err)
	defer func() {
		if t.Failed() {
			t.Logf("kwok output (tail):\n%s", k.Logs())
		}
		require.NoError(t, k.Stop())
	}()
	cl := c.Client

	const ns = "kwok-e2e"
	require.NoError(t, cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.PodSpec{
			// There is no scheduler: binding directly is what the fake Node is for.
			NodeName: k.Node,
			Containers: []corev1.Container{
				{Name: "app", Image: appImage},
				{Name: "sidecar", Image: sidecarImage},
			},
		},
	}
	require.NoError(t, cl.Create(ctx, pod))
	key := client.ObjectKeyFromObject(pod)

	// 1. kwok's pod-ready stage: Running, Ready, every container ready with image and imageID.
	var before corev1.Pod
	waitFor(ctx, t, cl, key, "Pod Running and Ready with imageIDs", func(p *corev1.Pod) error {
		if p == nil {
			t.Fatal("Pod disappeared")
		}
		if err := runningAndReady(p); err != nil {
			return err
		}
		for _, img := range []struct{ name, image string }{{"app", appImage}, {"sidecar", sidecarImage}} {
			s, err := status(p, img.name)
			if err != nil {
				return err
			}
			if s.Image != img.image || s.ImageID != kwok.ImageID(img.image) || s.ContainerID == "" {
				return fmt.Errorf("container %s: image %q imageID %q containerID %q", img.name, s.Image, s.ImageID, s.ContainerID)
			}
		}
		before = *p
		return nil
	})
	oldApp, _ := status(&before, "app")
	oldSidecar, _ := status(&before, "sidecar")

	// 2. In-place image change of one container through the API: spec.containers[*].image is one
	// of the few Pod spec fields Kubernetes lets change on an existing Pod. The JSON patch tests
	// the container name first so an index slip cannot change the wrong container.
	patch := fmt.Sprintf(`[{"op":"test","path":"/spec/containers/1/name","value":"sidecar"},`+
		`{"op":"replace","path":"/spec/containers/1/image","value":%q}]`, sidecarImageNew)
	require.NoError(t, cl.Patch(ctx, pod, client.RawPatch(types.JSONPatchType, []byte(patch))))

	// 3. kwok's pod-image-change stage: the new image and a new imageID for that container, as a
	// kubelet reports after the restart; the other container untouched; the Pod Ready at every
	// observation, not just at the end.
	waitFor(ctx, t, cl, key, "sidecar status reporting the new image", func(p *corev1.Pod) error {
		if p == nil {
			t.Fatal("Pod disappeared")
		}
		if err := runningAndReady(p); err != nil {
			t.Fatalf("Pod stopped being Running/Ready during the in-place image change: %v", err)
		}
		s, err := status(p, "sidecar")
		if err != nil {
			return err
		}
		if s.Image != sidecarImageNew {
			return fmt.Errorf("sidecar status image still %q", s.Image)
		}
		if s.ImageID != kwok.ImageID(sidecarImageNew) || s.ImageID == oldSidecar.ImageID {
			t.Fatalf("sidecar imageID %q after the change: want %q, different from the old %q", s.ImageID, kwok.ImageID(sidecarImageNew), oldSidecar.ImageID)
		}
		if s.RestartCount != oldSidecar.RestartCount+1 || s.ContainerID == oldSidecar.ContainerID || s.ContainerID == "" {
			t.Fatalf("sidecar not reported as restarted: restartCount %d (was %d), containerID %q (was %q)", s.RestartCount, oldSidecar.RestartCount, s.ContainerID, oldSidecar.ContainerID)
		}
		if s.LastTerminationState.Terminated == nil || s.LastTerminationState.Terminated.ContainerID != oldSidecar.ContainerID {
			t.Fatalf("sidecar lastState.terminated does not describe the old container: %+v", s.LastTerminationState)
		}
		a, err := status(p, "app")
		if err != nil {
			return err
		}
		if a.Image != oldApp.Image || a.ImageID != oldApp.ImageID || a.ContainerID != oldApp.ContainerID || a.RestartCount != oldApp.RestartCount || !a.Ready {
			t.Fatalf("app container status changed although its image did not: %+v, was %+v", a, oldApp)
		}
		t.Logf("sidecar %s -> %s: imageID %s -> %s, restartCount %d", oldSidecar.Image, s.Image, oldSidecar.ImageID, s.ImageID, s.RestartCount)
		return nil
	})

	// 4. kwok's pod-delete stage confirms deletion as a kubelet would; without it the Pod would
	// stay Terminating on a node nobody runs.
	require.NoError(t, cl.Delete(ctx, pod))
	waitFor(ctx, t, cl, key, "Pod deleted", func(p *corev1.Pod) error {
		if p != nil {
			return errors.New("still present")
		}
		return nil
	})
}

// waitFor polls the Pod until check returns nil; check gets nil once the Pod no longer exists.
// Every wait is bounded by timeout.
func waitFor(ctx context.Context, t *testing.T, cl client.Client, key client.ObjectKey, what string, check func(*corev1.Pod) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		var p corev1.Pod
		err := cl.Get(ctx, key, &p)
		switch {
		case apierrors.IsNotFound(err):
			if last = check(nil); last == nil {
				return
			}
		case err != nil:
			last = err
		default:
			if last = check(&p); last == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s: %v (is kwok running its stages? see its output below)", what, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func runningAndReady(p *corev1.Pod) error {
	if p.Status.Phase != corev1.PodRunning {
		return fmt.Errorf("phase %q", p.Status.Phase)
	}
	for _, want := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
		ok := false
		for _, c := range p.Status.Conditions {
			ok = ok || (c.Type == want && c.Status == corev1.ConditionTrue)
		}
		if !ok {
			return fmt.Errorf("condition %s not True: %+v", want, p.Status.Conditions)
		}
	}
	if len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return fmt.Errorf("%d container statuses for %d containers", len(p.Status.ContainerStatuses), len(p.Spec.Containers))
	}
	for _, s := range p.Status.ContainerStatuses {
		if !s.Ready || s.State.Running == nil {
			return fmt.Errorf("container %s not ready and running: %+v", s.Name, s)
		}
	}
	return nil
}

func status(p *corev1.Pod, name string) (corev1.ContainerStatus, error) {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == name {
			return s, nil
		}
	}
	return corev1.ContainerStatus{}, fmt.Errorf("no status for container %s", name)
}
