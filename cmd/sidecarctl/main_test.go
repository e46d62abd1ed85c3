package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/sidecarset/defaults"
	"github.com/sidecarops/sidecarops/sidecarset/history"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

const ts = "2026-01-02T03:04:05Z"

// sidecarctl runs the CLI in-process from the repository root, so paths read as in the README.
// The file lines of its stderr are left out: the tests that use it are about what is reported, and
// TestEveryProblemInOneRun and those after it about where (sidecarctlWithLines).
func sidecarctl(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	stdout, stderr, code = sidecarctlWithLines(t, stdin, args...)
	lines := withoutLines(strings.SplitAfter(stderr, "\n"))
	return stdout, strings.Join(lines, ""), code
}

func sidecarctlWithLines(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.NoError(t, os.Chdir("../.."))
	defer func() { require.NoError(t, os.Chdir(wd)) }()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), code
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run `go test ./cmd/sidecarctl -update` once and review the diff")
	assert.Equal(t, string(want), got)
}

func decodeDocs(t *testing.T, out string) []map[string]any {
	t.Helper()
	var docs []map[string]any
	for _, d := range strings.Split(out, "\n---\n") {
		var m map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(d), &m))
		docs = append(docs, m)
	}
	return docs
}

// The golden files pin the whole output; the assertions next to each state, from docs/openkruise-compat.md,
// why the output is right, so a golden file is never its own justification.
func TestInjectExamples(t *testing.T) {
	t.Run("logging", func(t *testing.T) {
		out, errOut, code := sidecarctl(t, "", "inject", "-f", "examples/logging", "--timestamp", ts)
		require.Equal(t, 0, code, errOut)
		golden(t, "logging.yaml", out)
		var d appsv1.Deployment
		require.NoError(t, yaml.Unmarshal([]byte(out), &d))
		spec := d.Spec.Template.Spec
		require.Equal(t, []string{"web", "log-agent"}, names(spec.Containers), "AfterAppContainer appends")
		agent := spec.Containers[1]
		assert.Equal(t, []corev1.EnvVar{{Name: "IS_INJECTED", Value: "true"}, {Name: "LOG_LEVEL", Value: "info"}}, agent.Env,
			"IS_INJECTED, then the transferred LOG_LEVEL of container web (compat §1.13 env order)")
		assert.Equal(t, []string{"/fluent-bit/etc", "/var/log/nginx"}, mountPaths(agent.VolumeMounts), "own mount, then the shared app mount (compat §1.15)")
		assert.Equal(t, []string{"logs", "log-agent-config"}, volumeNames(spec.Volumes), "only the referenced SidecarSet volume is injected (compat §1.13)")
		assert.Equal(t, corev1.PullIfNotPresent, agent.ImagePullPolicy, "defaulted: tagged image")
		assert.Equal(t, "logging-agent", d.Spec.Template.Annotations["kruise.io/sidecarset-injected-list"])
		var hashes map[string]map[string]any
		require.NoError(t, json.Unmarshal([]byte(d.Spec.Template.Annotations["kruise.io/sidecarset-hash"]), &hashes))
		assert.Equal(t, ts, hashes["logging-agent"]["updateTimestamp"])
		assert.Equal(t, []any{"log-agent"}, hashes["logging-agent"]["sidecarList"])
	})
	t.Run("envoy hot upgrade", func(t *testing.T) {
		out, errOut, code := sidecarctl(t, "", "inject", "-f", "examples/envoy-hotupgrade", "--timestamp", ts)
		require.Equal(t, 0, code, errOut)
		golden(t, "envoy-hotupgrade.yaml", out)
		var p corev1.Pod
		require.NoError(t, yaml.Unmarshal([]byte(out), &p))
		require.Equal(t, []string{"envoy-1", "envoy-2", "checkout"}, names(p.Spec.Containers), "twins replace envoy, BeforeAppContainer (compat §1.20)")
		assert.Equal(t, "envoyproxy/envoy:v1.32.1", p.Spec.Containers[0].Image)
		assert.Equal(t, "openkruise/hotupgrade-sample:empty", p.Spec.Containers[1].Image)
		assert.Equal(t, `{"envoy":"envoy-1"}`, p.Annotations["kruise.io/sidecarset-working-hotupgrade-container"])
		for k, v := range map[string]string{"version.sidecarset.kruise.io/envoy-1": "1", "versionalt.sidecarset.kruise.io/envoy-1": "0",
			"version.sidecarset.kruise.io/envoy-2": "0", "versionalt.sidecarset.kruise.io/envoy-2": "1"} {
			assert.Equal(t, v, p.Annotations[k], k)
		}
	})
	t.Run("namespace selector", func(t *testing.T) {
		out, errOut, code := sidecarctl(t, "", "inject", "-f", "examples/namespace-selector", "--timestamp", ts)
		require.Equal(t, 0, code, errOut)
		golden(t, "namespace-selector.yaml", out)
		docs := decodeDocs(t, out)
		require.Len(t, docs, 2, "only the two pods are printed, not the Namespaces or the SidecarSet")
		var charge, scratch corev1.Pod
		require.NoError(t, remarshal(docs[0], &charge))
		require.NoError(t, remarshal(docs[1], &scratch))
		require.Equal(t, []string{"tracing-init"}, names(charge.Spec.InitContainers), "payments is labelled tracing=enabled")
		assert.Equal(t, corev1.ContainerRestartPolicyAlways, *charge.Spec.InitContainers[0].RestartPolicy, "native sidecar")
		assert.Empty(t, scratch.Spec.InitContainers, "sandbox is not labelled")
		assert.Empty(t, scratch.Annotations)
	})
	t.Run("patch metadata with a whitelist bundle", func(t *testing.T) {
		out, errOut, code := sidecarctl(t, "", "inject", "-f", "examples/patch-metadata", "--bundle", "examples/whitelist-bundle", "--timestamp", ts)
		require.Equal(t, 0, code, errOut)
		golden(t, "patch-metadata.yaml", out)
		var s appsv1.StatefulSet
		require.NoError(t, yaml.Unmarshal([]byte(out), &s))
		a := s.Spec.Template.Annotations
		assert.Equal(t, "true", a["prometheus.io/scrape"], "Retain sets an absent key")
		assert.JSONEq(t, `{"path":"/metrics","port":9102}`, a["logging.example.com/scrape"], "MergePatchJson merges into the pod's value (RFC 7386)")
	})
}

func remarshal(in any, out any) error {
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

func names(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func mountPaths(ms []corev1.VolumeMount) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.MountPath)
	}
	return out
}

func volumeNames(vs []corev1.Volume) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Name)
	}
	return out
}

const podYAML = `apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels: {app: web}
spec:
  containers:
  - name: app
    image: app:1
`

const sidecarSetYAML = `apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata:
  name: %s
spec:
  selector:
    matchLabels: {app: web}
  containers:
  - name: %s
    image: agent:1
`

func yamlf(format string, args ...any) string { return strings.TrimSpace(fmt.Sprintf(format, args...)) }

func TestInjectJSONAndPatch(t *testing.T) {
	in := yamlf(sidecarSetYAML, "agent", "agent") + "\n---\n" + yamlf(podYAML, "one") + "\n---\n" + yamlf(podYAML, "two")

	out, errOut, code := sidecarctl(t, in, "inject", "-f", "-", "-o", "json", "--timestamp", ts)
	require.Equal(t, 0, code, errOut)
	var list corev1.List
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	assert.Equal(t, "List", list.Kind)
	require.Len(t, list.Items, 2, "several workloads print as a v1/List")

	single := yamlf(sidecarSetYAML, "agent", "agent") + "\n---\n" + yamlf(podYAML, "one")
	out, errOut, code = sidecarctl(t, single, "inject", "-f", "-", "-o", "json", "--timestamp", ts)
	require.Equal(t, 0, code, errOut)
	var injected corev1.Pod
	require.NoError(t, json.Unmarshal([]byte(out), &injected))
	assert.Equal(t, "Pod", injected.Kind, "one workload prints as the object itself")
	assert.Empty(t, injected.Namespace, "the manifest is printed as written: the default namespace is not written into it")
	assert.Equal(t, []string{"agent", "app"}, names(injected.Spec.Containers))

	out, errOut, code = sidecarctl(t, single, "inject", "-f", "-", "-o", "json", "--patch", "--timestamp", ts)
	require.Equal(t, 0, code, errOut)
	var patches []struct {
		Kind, Namespace, Name string
		Patch                 json.RawMessage
	}
	require.NoError(t, json.Unmarshal([]byte(out), &patches))
	require.Len(t, patches, 1)
	assert.Equal(t, "Pod", patches[0].Kind)
	assert.Equal(t, "one", patches[0].Name)
	// The patch applied to the pod as written must give exactly the injected pod.
	var original corev1.Pod
	require.NoError(t, yaml.Unmarshal([]byte(yamlf(podYAML, "one")), &original))
	origJSON, err := json.Marshal(&original)
	require.NoError(t, err)
	p, err := jsonpatch.DecodePatch(patches[0].Patch)
	require.NoError(t, err)
	patched, err := p.Apply(origJSON)
	require.NoError(t, err)
	var viaPatch corev1.Pod
	require.NoError(t, json.Unmarshal(patched, &viaPatch))
	injected.TypeMeta = viaPatch.TypeMeta
	assert.Equal(t, injected, viaPatch)

	// Pods without a namespace are judged in --namespace (default "default"): a SidecarSet scoped to
	// team-a injects only when --namespace says so.
	scoped := strings.Replace(single, "spec:\n  selector:", "spec:\n  namespace: team-a\n  selector:", 1)
	out, errOut, code = sidecarctl(t, scoped, "inject", "-f", "-", "-o", "json")
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out, "IS_INJECTED")
	out, errOut, code = sidecarctl(t, scoped, "inject", "-f", "-", "-o", "json", "--namespace", "team-a")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "IS_INJECTED")
}

func TestCheck(t *testing.T) {
	out, errOut, code := sidecarctl(t, "", "check", "-f", "examples/logging", "-f", "examples/envoy-hotupgrade")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "2 SidecarSet(s) checked: no errors\n", out)

	// Two SidecarSets selecting the same pods with the same container name conflict (compat §2 step 6).
	// Created in input order, as kubectl apply -f creates them, the first is admitted and the second
	// refused, naming the first; the invalid one reports its own errors and skips cross-object checks.
	broken := `apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata:
  name: broken
spec:
  containers:
  - name: x
    image: x:1
    podInjectPolicy: Sideways`
	for _, tc := range []struct {
		name, first, second string
	}{
		{"first then second", "first", "second"},
		{"second then first", "second", "first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := yamlf(sidecarSetYAML, tc.first, "proxy") + "\n---\n" + yamlf(sidecarSetYAML, tc.second, "proxy") + "\n---\n" + broken
			out, errOut, code := sidecarctl(t, in, "check", "-f", "-")
			assert.Equal(t, 1, code)
			assert.Empty(t, out)
			assert.Equal(t, []string{
				fmt.Sprintf(`<stdin>: document 2 (SidecarSet/%s): spec.containers[0].name: Invalid value: "proxy": container proxy already exist in %s`, tc.second, tc.first),
				`<stdin>: document 3 (SidecarSet/broken): spec.selector: Required value: no selector defined for SidecarSet`,
				`<stdin>: document 3 (SidecarSet/broken): spec.containers[0].podInjectPolicy: Invalid value: "Sideways": unsupported pod inject policy`,
				"3 error(s) in 2 of 3 SidecarSet(s)",
			}, strings.Split(strings.TrimSpace(errOut), "\n"))
		})
	}
}

func TestCheckWhitelist(t *testing.T) {
	_, errOut, code := sidecarctl(t, "", "check", "-f", "examples/patch-metadata")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "examples/patch-metadata/sidecarset.yaml: document 1 (SidecarSet/logging-metrics): spec.patchPodMetadata: Required value: SidecarSet patch metadata whitelist not found")

	out, errOut, code := sidecarctl(t, "", "check", "-f", "examples/patch-metadata", "--bundle", "examples/whitelist-bundle")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "1 SidecarSet(s) checked: no errors\n", out)

	// OpenKruise's ConfigMap works the same when no whitelist bundle is given.
	cm := `apiVersion: v1
kind: ConfigMap
metadata: {name: kruise-configuration, namespace: kruise-system}
data:
  SidecarSet_PatchPodMetadata_WhiteList: '{"rules":[{"allowedAnnotationKeyExprs":["^prometheus\\.io/"]}]}'`
	_, errOut, code = sidecarctl(t, cm, "check", "-f", "examples/patch-metadata", "-f", "-")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "spec.patchPodMetadata[1].annotations[logging.example.com/scrape]")
	assert.NotContains(t, errOut, "prometheus.io/scrape")
}

func TestExplain(t *testing.T) {
	out, errOut, code := sidecarctl(t, "", "explain", "-f", "examples/namespace-selector")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, `Pod/charge (namespace payments):
  tracing-agent: matches
Pod/scratch (namespace sandbox):
  tracing-agent: namespaceSelector: matchLabels tracing=enabled: namespace sandbox has no label tracing
`, out)

	out, errOut, code = sidecarctl(t, "", "explain", "-f", "examples/namespace-selector", "--pod", "scratch")
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out, "charge")

	_, errOut, code = sidecarctl(t, "", "explain", "-f", "examples/namespace-selector", "--pod", "nope")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `--pod "nope": no workload of that name`)
}

func TestCompileSignedBundle(t *testing.T) {
	dir := t.TempDir()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pubDER, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	require.NoError(t, err)
	priv := filepath.Join(dir, "key.pem")
	pub := filepath.Join(dir, "pub.pem")
	require.NoError(t, os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}), 0o600))
	require.NoError(t, os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600))
	bundlePath := filepath.Join(dir, "bundle.tar.gz")

	out, errOut, code := sidecarctl(t, "", "compile", "-f", "examples/logging", "-o", bundlePath, "--signing-key", priv)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "1 SidecarSet(s)")
	v, err := bundles.LoadVerificationKeys([]string{pub}, "RS256", "")
	require.NoError(t, err)
	b, err := bundles.Read(bundlePath, v)
	require.NoError(t, err)
	assert.Contains(t, out, b.Manifest.Revision)

	_, errOut, code = sidecarctl(t, "", "compile", "-f", "examples/logging")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "-o FILE is required")
}

func TestPolicyTest(t *testing.T) {
	out, errOut, code := sidecarctl(t, "", "policy", "test", "--coverage", "--threshold", "90", "examples/policies")
	require.Equal(t, 0, code, errOut+out)
	assert.Regexp(t, `PASS: \d+/\d+`, out)
	assert.Contains(t, out, "coverage: ")
	assert.Contains(t, out, "gates.rego", "the administrator's policy is covered too")
}

func TestBadInput(t *testing.T) {
	cases := []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"no input", "", []string{"inject"}, "no input: give at least one -f PATH"},
		{"missing file", "", []string{"inject", "-f", "does/not/exist.yaml"}, "does/not/exist.yaml"},
		{"malformed yaml", "kind: [", []string{"inject", "-f", "-"}, "<stdin>"},
		{"unknown field", strings.Replace(yamlf(sidecarSetYAML, "a", "b"), "image:", "imagee:", 1), []string{"check", "-f", "-"}, "spec.containers[0].imagee"},
		{"unknown version of a kind read here", "apiVersion: apps.kruise.io/v1beta1\nkind: CloneSet\nmetadata: {name: x}", []string{"inject", "-f", "-"}, `unsupported apiVersion "apps.kruise.io/v1beta1" for kind CloneSet`},
		{"bad timestamp", "", []string{"inject", "-f", "-", "--timestamp", "yesterday"}, `--timestamp "yesterday": not RFC3339`},
		{"bad output", "", []string{"inject", "-f", "-", "-o", "xml"}, `-o "xml": unsupported output format`},
		{"duplicate SidecarSet", yamlf(sidecarSetYAML, "a", "b") + "\n---\n" + yamlf(sidecarSetYAML, "a", "c"), []string{"check", "-f", "-"}, `SidecarSet "a" is also defined at`},
		{"bad whitelist ConfigMap", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kruise-configuration, namespace: kruise-system}\ndata:\n  SidecarSet_PatchPodMetadata_WhiteList: '{\"rules\": ['",
			[]string{"check", "-f", "-"}, "ConfigMap/kruise-configuration"},
		{"inject refuses an invalid selector", strings.Replace(yamlf(sidecarSetYAML, "a", "b"), "matchLabels: {app: web}", "matchExpressions: [{key: app, operator: Sometimes}]", 1),
			[]string{"inject", "-f", "-"}, "<stdin>: document 1 (SidecarSet/a): spec.selector.matchExpressions[0].operator"},
		{"inject refuses an unknown volume", yamlf(sidecarSetYAML, "a", "b") + "\n    volumeMounts: [{name: nope, mountPath: /x}]",
			[]string{"inject", "-f", "-"}, "<stdin>: document 1 (SidecarSet/a): spec.containers[0].volumeMounts[0].name: Not found: \"nope\""},
		{"explain refuses an invalid regex", yamlf(sidecarSetYAML, "a", "b") + "\n    resourcesPolicy: {targetContainersMode: sum, targetContainersNameRegex: '[', resourcesExpr: {limits: {cpu: cpu}}}",
			[]string{"explain", "-f", "-"}, "targetContainersNameRegex"},
		{"unsigned bundle with keys", "", []string{"check", "-f", "examples/logging", "--bundle", "examples/whitelist-bundle", "--verification-key", "cmd/sidecarctl/testdata/keys/public.pem"}, "bundle missing .signatures.json"},
	}
	// A command line that cannot be run as written exits 2; what a command finds, 1.
	usage := map[string]bool{"no input": true, "bad timestamp": true, "bad output": true}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := sidecarctl(t, tc.stdin, tc.args...)
			want := 1
			if usage[tc.name] {
				want = exitUsage
			}
			assert.Equal(t, want, code)
			assert.Contains(t, errOut, tc.want)
			assert.NotContains(t, errOut, "panic")
		})
	}
}

// injectionStrategy.revision end to end: the ControllerRevision in the input is restored and
// injected instead of the latest spec (compat §1.5, W6), and the SidecarSet's status.latestRevision
// in the input is what the pod records as controllerRevision (compat §1.11).
func TestInjectHistoricalRevision(t *testing.T) {
	old := &v1beta1.SidecarSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps.kruise.io/v1alpha1", Kind: "SidecarSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: v1beta1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "agent", Image: "agent:1"}}},
		},
	}
	require.NoError(t, defaults.SidecarSetAndHash(old))
	raw, err := history.Raw(old)
	require.NoError(t, err)
	cr := &appsv1.ControllerRevision{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ControllerRevision"},
		ObjectMeta: metav1.ObjectMeta{Name: history.Name(old, raw, 0), Namespace: "kruise-system", Labels: map[string]string{v1beta1.SidecarSetNameLabel: "agent"}},
		Data:       runtime.RawExtension{Raw: raw},
		Revision:   1,
	}
	crYAML, err := yaml.Marshal(cr)
	require.NoError(t, err)

	current := yamlf(sidecarSetYAML, "agent", "agent")
	current = strings.Replace(current, "image: agent:1", "image: agent:2", 1)
	withRevision := current + "\n  injectionStrategy:\n    revision:\n      revisionName: " + cr.Name + "\nstatus:\n  latestRevision: agent-current"
	pod := yamlf(podYAML, "one")

	cases := []struct {
		name, sidecarSet, wantImage, wantRevision string
	}{
		{"latest spec", current + "\nstatus:\n  latestRevision: agent-current", "agent:2", "agent-current"},
		{"revisionName restores the old spec", withRevision, "agent:1", cr.Name},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.sidecarSet + "\n---\n" + string(crYAML) + "\n---\n" + pod
			out, errOut, code := sidecarctl(t, in, "inject", "-f", "-", "-o", "json", "--timestamp", ts)
			require.Equal(t, 0, code, errOut)
			var p corev1.Pod
			require.NoError(t, json.Unmarshal([]byte(out), &p))
			require.Equal(t, []string{"agent", "app"}, names(p.Spec.Containers))
			assert.Equal(t, tc.wantImage, p.Spec.Containers[0].Image)
			var hashes map[string]map[string]any
			require.NoError(t, json.Unmarshal([]byte(p.Annotations[v1beta1.SidecarSetHashAnnotation]), &hashes))
			assert.Equal(t, tc.wantRevision, hashes["agent"]["controllerRevision"])
		})
	}

	missing := strings.Replace(withRevision, cr.Name, "agent-gone", 1) + "\n---\n" + pod
	_, errOut, code := sidecarctl(t, missing, "inject", "-f", "-")
	assert.Equal(t, 1, code, "a configured revision that does not exist denies injection (quirk Q6)")
	assert.Contains(t, errOut, "agent-gone")
}

// SidecarSets of both versions are read in one input, and an error names the field as written: a
// v1alpha1 spec.namespace is validated as the namespaceSelector it converts into, but reported as
// spec.namespace.
func TestBothVersionsOneInput(t *testing.T) {
	in := `apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata: {name: alpha}
spec:
  namespace: "not a namespace!"
  selector: {matchLabels: {app: a}}
  containers: [{name: a, image: a:1}]
---
apiVersion: apps.kruise.io/v1beta1
kind: SidecarSet
metadata: {name: beta}
spec:
  customVersion: v2
  namespaceSelector: {matchLabels: {"kubernetes.io/metadata.name": "not a namespace!"}}
  selector: {matchLabels: {app: b}}
  containers: [{name: b, image: b:1}]
`
	_, stderr, code := sidecarctl(t, in, "check", "-f", "-")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `<stdin>: document 1 (SidecarSet/alpha): spec.namespace: Invalid value: "not a namespace!"`)
	assert.Contains(t, stderr, `<stdin>: document 2 (SidecarSet/beta): spec.namespaceSelector.matchLabels: Invalid value: "not a namespace!"`)
	// The v1beta1 selector gets both of its checks; the v1alpha1 string one line.
	assert.Contains(t, stderr, "3 error(s) in 2 of 2 SidecarSet(s)")
}

func TestVersion(t *testing.T) {
	out, _, code := sidecarctl(t, "", "version")
	require.Equal(t, 0, code)
	assert.Regexp(t, `^sidecarctl \S+ \(commit \S+, go1\.\d+[^,]*, OPA v1\.\d+\.\d+\)\n$`, out)
	flag, _, code := sidecarctl(t, "", "--version")
	require.Equal(t, 0, code)
	assert.Equal(t, out, flag, "--version prints the same line")
	js, _, code := sidecarctl(t, "", "version", "-o", "json")
	require.Equal(t, 0, code)
	var info map[string]string
	require.NoError(t, json.Unmarshal([]byte(js), &info))
	assert.Equal(t, []string{"commit", "goVersion", "opaVersion", "version"}, slices.Sorted(maps.Keys(info)))
	_, stderr, code := sidecarctl(t, "", "version", "-o", "yaml")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `-o "yaml": want text or json`)
}
