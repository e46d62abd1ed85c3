package loader

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/util"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/engine"
	"github.com/sidecarops/sidecarops/internal/testing/testfiles"
)

// harness is a running Loader with its own registry, engine and Event recorder.
type harness struct {
	st     *Loader
	eng    *engine.Engine
	reg    *prometheus.Registry
	events *events.FakeRecorder
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	h := &harness{eng: &engine.Engine{}, reg: prometheus.NewRegistry(), events: events.NewFakeRecorder(100)}
	m, err := NewMetrics(h.reg)
	require.NoError(t, err)
	opts.Metrics = m
	opts.Events = h.events
	opts.EventObject = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sidecarops-system"}}
	if opts.Debounce == 0 {
		opts.Debounce = 5 * time.Millisecond
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = testr.NewWithOptions(t, testr.Options{Verbosity: 0})
	}
	st, err := New(h.eng, opts)
	require.NoError(t, err)
	h.st = st
	return h
}

// start runs the compile loop until the test ends.
func (h *harness) start(t *testing.T) { runUntilCleanup(t, h.st.Start) }

// runUntilCleanup runs a Runnable's Start until the test ends, and waits for it to return.
func runUntilCleanup(t *testing.T, start func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = start(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func (h *harness) compiles(result string) float64 {
	return testutil.ToFloat64(h.st.metrics.compiles.WithLabelValues(result))
}

func (h *harness) activations(source, result string) float64 {
	return testutil.ToFloat64(h.st.metrics.activations.WithLabelValues(source, result))
}

func (h *harness) sourceErrors(source string) float64 {
	return testutil.ToFloat64(h.st.metrics.sourceErrors.WithLabelValues(source))
}

func (h *harness) refused(source string) float64 {
	return testutil.ToFloat64(h.st.metrics.refused.WithLabelValues(source))
}

func (h *harness) refusedPolls(source string) float64 {
	return testutil.ToFloat64(h.st.metrics.refusedPolls.WithLabelValues(source))
}

// drainEvents returns the Events recorded so far.
func (h *harness) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-h.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// eventually polls cond until it holds or a generous deadline passes: the machine runs heavy builds,
// so the deadline is about failure detection, not timing.
func eventually(t *testing.T, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: "+msg, args...)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func sidecarSet(name string, matchLabels map[string]string, mutate ...func(*v1beta1.SidecarSet)) *v1beta1.SidecarSet {
	ss := &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: matchLabels},
			Containers: []v1beta1.SidecarContainer{{}},
		},
	}
	ss.Spec.Containers[0].Name = name + "-c"
	ss.Spec.Containers[0].Image = "busybox"
	for _, m := range mutate {
		m(ss)
	}
	return ss
}

func podJSON(t *testing.T, labels map[string]string, hostNetwork bool) []byte {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: labels},
		Spec: corev1.PodSpec{HostNetwork: hostNetwork, Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	raw, err := json.Marshal(p)
	require.NoError(t, err)
	return raw
}

// decide runs the current snapshot's pod decision for a hostNetwork pod labelled app=web.
func decide(t *testing.T, e *engine.Engine) engine.Decision {
	t.Helper()
	snap := e.Current()
	require.NotNil(t, snap)
	d, err := snap.Decide(context.Background(), "default", podJSON(t, map[string]string{"app": "web"}, true))
	require.NoError(t, err)
	return d
}

// gateFiles is an administrators' gate bundle denying hostNetwork pods with reason.
func gateFiles(revision, reason string) map[string]string {
	return map[string]string{
		".manifest":        `{"revision":"` + revision + `","roots":["gates"]}`,
		"gates/gates.rego": "package gates\n\ndeny_injection contains " + `"` + reason + `"` + " if input.pod.spec.hostNetwork\n",
		// Tests beside the policy are not served (bundles.Read filters them).
		"gates/gates_test.rego": "package gates_test\n\ntest_x if true\n",
	}
}

// brokenGateFiles parse but do not compile (undefined function).
func brokenGateFiles(revision string) map[string]string {
	return map[string]string{
		".manifest":        `{"revision":"` + revision + `","roots":["gates"]}`,
		"gates/gates.rego": "package gates\n\ndeny_injection contains x if x := undefined_function(1)\n",
	}
}

func whitelistFiles(revision, expr string) map[string]string {
	return map[string]string{
		".manifest":           `{"revision":"` + revision + `","roots":["whitelist"]}`,
		"whitelist/data.json": `{"rules":[{"allowedAnnotationKeyExprs":["` + expr + `"]}]}`,
	}
}

func writeDir(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	require.NoError(t, os.RemoveAll(dir))
	testfiles.Write(t, dir, files)
}

func tarGz(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(files[name]))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// readBundle reads files as an administrator's bundle without verification.
func readBundle(t *testing.T, files map[string]string) *bundle.Bundle {
	t.Helper()
	dir := t.TempDir()
	writeDir(t, dir, files)
	raw, err := tarDirectory(dir, bundles.Limits{})
	require.NoError(t, err)
	b, err := bundles.ReadBytes("test", raw, nil)
	require.NoError(t, err)
	return b
}

var (
	keysOnce        sync.Once
	testPriv        string
	testPub         string
	otherPriv       string
	keyGenerationEr error
)

// testKeys returns one RSA key pair for signing and another private key, generated once per run.
func testKeys(t testing.TB) (priv, pub, other string) {
	t.Helper()
	keysOnce.Do(func() {
		gen := func() (string, string) {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				keyGenerationEr = err
				return "", ""
			}
			pubDER, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
			if err != nil {
				keyGenerationEr = err
				return "", ""
			}
			return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})),
				string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}))
		}
		testPriv, testPub = gen()
		otherPriv, _ = gen()
	})
	require.NoError(t, keyGenerationEr)
	return testPriv, testPub, otherPriv
}

func testVerification(t testing.TB, scope string) *bundles.Verification {
	t.Helper()
	_, pub, _ := testKeys(t)
	v, err := bundles.NewVerification(map[string]string{"default": pub}, "RS256", scope)
	require.NoError(t, err)
	return v
}

// withoutTests leaves out Rego test files, as `opa build --ignore '*_test.rego'` does.
func withoutTests(files map[string]string) map[string]string {
	out := maps.Clone(files)
	maps.DeleteFunc(out, func(name, _ string) bool { return strings.HasSuffix(name, "_test.rego") })
	return out
}

// sign adds .signatures.json to files as `opa build --ignore '*_test.rego' --signing-key` does: test
// files left out, every file hashed (JSON canonically), one JWT with key id "default", and the claims
// given (e.g. a scope). Test files are left out because bundles.Read skips them, and a signature
// naming a file it skips is refused ("specified in bundle signatures but not found").
func sign(t testing.TB, files map[string]string, priv string, claims map[string]any) map[string]string {
	t.Helper()
	return signAs(t, files, priv, "default", claims)
}

func signWithKeyID(t *testing.T, files map[string]string, priv, keyID string) map[string]string {
	t.Helper()
	return signAs(t, files, priv, keyID, nil)
}

// bundlesReadBytes reads a tarball with v's bundles form, as every source does.
func bundlesReadBytes(raw []byte, v *bundles.Verification) (*bundle.Bundle, error) {
	return bundles.ReadBytes("test.tar.gz", raw, v)
}

func signAs(t testing.TB, files map[string]string, priv, keyID string, claims map[string]any) map[string]string {
	t.Helper()
	files = withoutTests(files)
	hasher, err := bundle.NewSignatureHasher(bundle.SHA256)
	require.NoError(t, err)
	var infos []bundle.FileInfo
	for _, name := range slices.Sorted(maps.Keys(files)) {
		var v any = []byte(files[name])
		if bundle.IsStructuredDoc(name) {
			var parsed any
			require.NoError(t, util.Unmarshal([]byte(files[name]), &parsed))
			v = parsed
		}
		sum, err := hasher.HashFile(v)
		require.NoError(t, err)
		infos = append(infos, bundle.NewFile(name, hex.EncodeToString(sum), bundle.SHA256.String()))
	}
	claimsPath := ""
	if claims != nil {
		raw, err := json.Marshal(claims)
		require.NoError(t, err)
		claimsPath = filepath.Join(t.TempDir(), "claims.json")
		require.NoError(t, os.WriteFile(claimsPath, raw, 0o600))
	}
	token, err := bundle.GenerateSignedToken(infos, bundle.NewSigningConfig(priv, "RS256", claimsPath), keyID)
	require.NoError(t, err)
	out := maps.Clone(files)
	out[".signatures.json"] = `{"signatures":["` + token + `"]}`
	return out
}
