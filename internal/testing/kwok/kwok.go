package kwok

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sidecarops/sidecarops/internal/testing/testfiles"
)

// Version is the kwok release hack/kwok-bin.sh builds by default; the binary is looked up under it.
const Version = "v0.8.0"

// The annotation kwok is told to manage Nodes by (--manage-nodes-with-annotation-selector), as in
// kwok's own deployment manifests: only Nodes carrying it get kubelet behaviour.
const (
	ManageAnnotation      = "kwok.x-k8s.io/node"
	ManageAnnotationValue = "fake"
)

// DefaultNode is the fake Node's name unless Options.Node says otherwise.
const DefaultNode = "kwok-node"

//go:embed stages/*.yaml
var stages embed.FS

// Options configure Start.
type Options struct {
	// Binary is the kwok executable; empty means BinaryPath().
	Binary string
	// Kubeconfig is the kubeconfig content (envtest.Environment.KubeConfig); it is written to the
	// working directory. Ignored when KubeconfigPath is set.
	Kubeconfig []byte
	// KubeconfigPath is a kubeconfig file (devcluster.Cluster.Kubeconfig).
	KubeconfigPath string
	// Node is the name of the fake Node to create; empty means DefaultNode.
	Node string
	// Log, if set, also receives kwok's output (it always goes to a file, see Kwok.Logs).
	Log io.Writer
	// ReadyTimeout bounds the wait for the fake Node to become Ready; zero means 30s.
	ReadyTimeout time.Duration
	// ImageChangeDelay is how long the fake kubelet takes to restart a container whose image
	// changed in place (the pod-image-change stage's delay); zero reports the new image at once.
	// Rollout tests use it so that upgraded pods stay unavailable long enough to be observed.
	ImageChangeDelay time.Duration
}

// Kwok is a running kwok controller and the fake Node it manages.
type Kwok struct {
	// Node is the fake Node's name; Pods with spec.nodeName set to it are run by kwok.
	Node string

	dir     string
	logPath string
	logFile *os.File
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error // set before done is closed
	stop    sync.Once
	stopErr error
}

// BinaryPath is where hack/kwok-bin.sh puts the kwok binary, overridden by $KWOK_BIN. It mirrors
// the script's CACHE_DIR / XDG_CACHE_HOME / HOME fallbacks.
func BinaryPath() (string, error) {
	if p := os.Getenv("KWOK_BIN"); p != "" {
		return p, nil
	}
	dir := os.Getenv("CACHE_DIR")
	if dir == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("kwok: locating the binary cache: %w", err)
			}
			base = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(base, "sidecarops", "bin")
	}
	return filepath.Join(dir, "kwok-"+Version, "kwok"), nil
}

// tagOrDigest matches a trailing ":tag" and/or "@digest" of an image reference; a ':' followed by
// a '/' is a registry port, not a tag.
var tagOrDigest = regexp.MustCompile(`(:[^:/@]+)?(@.*)?$`)

// ImageID is the imageID the stages report for image: the same formula as the statusTemplates in
// stages/pod-ready.yaml and stages/pod-image-change.yaml (sprig's regexReplaceAll and sha256sum).
func ImageID(image string) string {
	sum := sha256.Sum256([]byte(image))
	return "docker-pullable://" + tagOrDigest.ReplaceAllString(image, "") + "@sha256:" + hex.EncodeToString(sum[:])
}

// FakeNode is the Node kwok manages: the annotation it selects on, the labels kwok's examples
// give a fake node, and a NoSchedule taint so a real scheduler would not place ordinary Pods on
// it (binding through spec.nodeName, as the tests do, ignores it).
func FakeNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				ManageAnnotation:               ManageAnnotationValue,
				"node.alpha.kubernetes.io/ttl": "0",
			},
			Labels: map[string]string{
				"kubernetes.io/arch":            "amd64",
				"kubernetes.io/os":              "linux",
				"kubernetes.io/hostname":        name,
				"kubernetes.io/role":            "agent",
				"node-role.kubernetes.io/agent": "",
				"type":                          "kwok",
			},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
	}
}

// Start writes the stage configuration, starts kwok against the cluster, creates the fake Node
// (reusing it if it exists) and returns once kwok has marked it Ready — proof that kwok is
// connected and playing stages. Stop it with Stop.
func Start(ctx context.Context, o Options) (*Kwok, error) {
	bin := o.Binary
	if bin == "" {
		var err error
		if bin, err = BinaryPath(); err != nil {
			return nil, err
		}
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("kwok: no kwok %s binary at %s: run hack/kwok-bin.sh to build it (or set KWOK_BIN)", Version, bin)
	}
	if o.Kubeconfig == nil && o.KubeconfigPath == "" {
		return nil, errors.New("kwok: Options.Kubeconfig or Options.KubeconfigPath is required")
	}
	k := &Kwok{Node: o.Node, done: make(chan struct{})}
	if k.Node == "" {
		k.Node = DefaultNode
	}
	var err error
	if k.dir, err = os.MkdirTemp("", "sidecarops-kwok-"); err != nil {
		return nil, fmt.Errorf("kwok: %w", err)
	}
	fail := func(err error) (*Kwok, error) {
		logs := k.Logs()
		_ = k.Stop()
		if logs != "" {
			return nil, fmt.Errorf("%w\nkwok output (tail):\n%s", err, logs)
		}
		return nil, err
	}

	kubeconfig := o.KubeconfigPath
	if kubeconfig == "" {
		kubeconfig = filepath.Join(k.dir, "kubeconfig")
		if err := os.WriteFile(kubeconfig, o.Kubeconfig, 0o600); err != nil {
			return fail(fmt.Errorf("kwok: writing kubeconfig: %w", err))
		}
	}
	configs, err := writeStages(filepath.Join(k.dir, "stages"), o.ImageChangeDelay)
	if err != nil {
		return fail(err)
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--manage-nodes-with-annotation-selector=" + ManageAnnotation + "=" + ManageAnnotationValue,
	}
	for _, c := range configs {
		args = append(args, "--config="+c)
	}

	k.logPath = filepath.Join(k.dir, "kwok.log")
	if k.logFile, err = os.Create(k.logPath); err != nil {
		return fail(fmt.Errorf("kwok: %w", err))
	}
	var out io.Writer = k.logFile
	if o.Log != nil {
		out = io.MultiWriter(k.logFile, o.Log)
	}
	k.cmd = exec.Command(bin, args...) // #nosec G204 -- the binary this repository builds
	k.cmd.Stdout, k.cmd.Stderr = out, out
	// kwok otherwise also reads ~/.kwok/kwok.yaml, whose stages would mix with ours.
	k.cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+k.dir)
	if err := k.cmd.Start(); err != nil {
		return fail(fmt.Errorf("kwok: starting %s: %w", bin, err))
	}
	go func() {
		k.waitErr = k.cmd.Wait()
		close(k.done)
	}()

	cs, err := clientset(kubeconfig)
	if err != nil {
		return fail(err)
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, FakeNode(k.Node), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fail(fmt.Errorf("kwok: creating Node %s: %w", k.Node, err))
	}
	timeout := o.ReadyTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	if err := k.waitNodeReady(ctx, cs, timeout); err != nil {
		return fail(err)
	}
	return k, nil
}

func clientset(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kwok: reading kubeconfig %s: %w", kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kwok: %w", err)
	}
	return cs, nil
}

// writeStages copies the embedded Stage files into dir and returns their paths.
func writeStages(dir string, imageChangeDelay time.Duration) ([]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("kwok: %w", err)
	}
	entries, err := fs.Glob(stages, "stages/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("kwok: %w", err)
	}
	var paths []string
	for _, e := range entries {
		b, err := stages.ReadFile(e)
		if err != nil {
			return nil, fmt.Errorf("kwok: %w", err)
		}
		if filepath.Base(e) == "pod-image-change.yaml" && imageChangeDelay > 0 {
			delay := fmt.Sprintf("\n  delay:\n    durationMilliseconds: %d\n  next:\n", imageChangeDelay.Milliseconds())
			if !bytes.Contains(b, []byte("\n  next:\n")) {
				return nil, fmt.Errorf("kwok: stage %s has no spec.next to put a delay before", e)
			}
			b = bytes.Replace(b, []byte("\n  next:\n"), []byte(delay), 1)
		}
		p := filepath.Join(dir, filepath.Base(e))
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return nil, fmt.Errorf("kwok: writing stage %s: %w", p, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// waitNodeReady polls until kwok's node-initialize stage has marked the Node Ready, failing early
// if kwok exits.
func (k *Kwok) waitNodeReady(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		n, err := cs.CoreV1().Nodes().Get(ctx, k.Node, metav1.GetOptions{})
		if err == nil {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
			last = errors.New("no Ready=True condition yet")
		} else {
			last = err
		}
		select {
		case <-k.done:
			return fmt.Errorf("kwok: exited before Node %s became Ready: %w", k.Node, k.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("kwok: Node %s not Ready within %s (%w): is kwok connecting to the API server?", k.Node, timeout, last)
		case <-tick.C:
		}
	}
}

// Logs returns the last 4 KiB of kwok's output, for failure messages.
func (k *Kwok) Logs() string {
	if k.logPath == "" {
		return ""
	}
	return testfiles.Tail(k.logPath, 4096)
}

// Stop terminates kwok (SIGTERM, SIGKILL after 10s) and removes its working directory. The fake
// Node is left in place: Pods bound to it would otherwise be orphaned mid-test, and the cluster is
// normally torn down right after. Stop reports kwok having exited on its own before it was asked
// to, since everything after that point ran without a kubelet.
func (k *Kwok) Stop() error {
	k.stop.Do(func() {
		var errs []error
		if k.cmd != nil && k.cmd.Process != nil {
			select {
			case <-k.done:
				errs = append(errs, fmt.Errorf("kwok: had exited before Stop: %w", k.waitErr))
			default:
				_ = k.cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-k.done:
				case <-time.After(10 * time.Second):
					_ = k.cmd.Process.Kill()
					<-k.done
					errs = append(errs, errors.New("kwok: did not stop within 10s of SIGTERM; killed"))
				}
			}
		}
		if k.logFile != nil {
			_ = k.logFile.Close()
		}
		if k.dir != "" {
			if err := os.RemoveAll(k.dir); err != nil {
				errs = append(errs, err)
			}
		}
		k.stopErr = errors.Join(errs...)
	})
	return k.stopErr
}
