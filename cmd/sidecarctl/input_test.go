package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/sidecarops/sidecarops/internal/manifest"
)

// What SidecarSets and manifests written by other people need (issue #12 section 4): input that
// OpenKruise and kubectl take is taken here, every problem is reported, and the rest goes on.

const warnLastKept = "duplicate field: the last value is kept, as kubectl keeps it"

const serviceYAML = `apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  ports:
  - port: 80
    targetPort: 8080
  selector:
    app: web`

// cloneSetYAML is an OpenKruise CloneSet with fields of its own around the pod template.
const cloneSetYAML = `apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: web
spec:
  replicas: 3
  scaleStrategy:
    maxUnavailable: 50%
  updateStrategy:
    type: InPlaceIfPossible
    partition: 1
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: app:1`

func TestReadsWhatOthersWrote(t *testing.T) {
	agent := yamlf(sidecarSetYAML, "agent", "agent")
	pod := yamlf(podYAML, "one")
	// The probe's two inputs of issue 35 item 4, scaled down: a scalar aliased in documents each
	// under --max-document-bytes, twenty of them, and a scalar of escapes aliased, two of them.
	aliased := "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k0: &a " + strings.Repeat("x", 100) + ", k1: *a, k2: *a, k3: *a}\n"
	escaped := strings.Replace(aliased, strings.Repeat("x", 100), `"`+strings.Repeat(`\x01`, 100)+`"`, 1)
	tests := []struct {
		name       string
		stdin      string
		args       []string
		code       int
		stderr     []string // exact lines
		stdout     []string // substrings of stdout
		notStdout  []string
		stdoutDocs int // documents printed, when not 0
	}{
		{
			name:   "metadata.namespace on a SidecarSet is cleared, as the API server does, with a warning",
			stdin:  strings.Replace(agent, "name: agent\n", "name: agent\n  namespace: kruise-system\n", 1) + "\n---\n" + pod,
			args:   []string{"inject", "-f", "-"},
			stderr: []string{"warning: <stdin>: document 1 (SidecarSet/agent): metadata.namespace: ignored: a SidecarSet is cluster-scoped, and the API server clears the namespace before any webhook sees it"},
			stdout: []string{"IS_INJECTED", "kruise.io/sidecarset-injected-list: agent"},
		},
		{
			name:   "check admits a SidecarSet with metadata.namespace too",
			stdin:  strings.Replace(agent, "name: agent\n", "name: agent\n  namespace: kruise-system\n", 1),
			args:   []string{"check", "-f", "-"},
			stderr: []string{"warning: <stdin>: document 1 (SidecarSet/agent): metadata.namespace: ignored: a SidecarSet is cluster-scoped, and the API server clears the namespace before any webhook sees it"},
			stdout: []string{"1 SidecarSet(s) checked: no errors"},
		},
		{
			name:   "a repeated key warns and its last value counts, as kubectl sends it",
			stdin:  agent + "\n---\n" + strings.Replace(pod, "labels: {app: web}", "labels:\n    app: api\n    app: web", 1),
			args:   []string{"inject", "-f", "-"},
			stderr: []string{"warning: <stdin>: document 2 (Pod/one): metadata.labels.app: " + warnLastKept},
			stdout: []string{"IS_INJECTED", "app: web"},
		},
		{
			name:       "a kind sidecarctl does not read is printed unchanged, in input order",
			stdin:      serviceYAML + "\n---\n" + agent + "\n---\n" + pod,
			args:       []string{"inject", "-f", "-"},
			stderr:     []string{"warning: 1 document(s) of kinds sidecarctl does not read, passed through unchanged: v1 Service (1)"},
			stdout:     []string{"kind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n  - port: 80\n    targetPort: 8080\n  selector:\n    app: web\n---\n", "IS_INJECTED"},
			stdoutDocs: 2,
		},
		{
			name:   "check ignores it",
			stdin:  serviceYAML + "\n---\n" + agent,
			args:   []string{"check", "-f", "-"},
			stderr: []string{"warning: 1 document(s) of kinds sidecarctl does not read, ignored: v1 Service (1)"},
			stdout: []string{"1 SidecarSet(s) checked: no errors"},
		},
		{
			name:       "an OpenKruise CloneSet is injected, its own fields kept",
			stdin:      agent + "\n---\n" + cloneSetYAML,
			args:       []string{"inject", "-f", "-"},
			stdout:     []string{"kind: CloneSet", "IS_INJECTED", "maxUnavailable: 50%", "type: InPlaceIfPossible", "partition: 1", "replicas: 3"},
			stdoutDocs: 1,
		},
		{
			name:   "-f DIR skips kustomization.yaml",
			args:   []string{"inject", "-f", "examples/sidecar-agent", "--timestamp", ts},
			stderr: []string{"warning: examples/sidecar-agent/kustomization.yaml: skipped: kustomize's configuration, not a manifest (read what it builds with `kustomize build examples/sidecar-agent` and -f -)"},
			stdout: []string{"name: sidecar-agent", "kind: Deployment"},
		},
		{
			name:  "a refused SidecarSet does not stop inject: the admitted ones inject",
			stdin: yamlf(sidecarSetYAML, "bad", "bad") + "\n    volumeMounts: [{name: nope, mountPath: /x}]\n---\n" + agent + "\n---\n" + pod,
			args:  []string{"inject", "-f", "-"},
			code:  1,
			stderr: []string{
				`<stdin>: document 1 (SidecarSet/bad): spec.containers[0].volumeMounts[0].name: Not found: "nope"`,
			},
			stdout:    []string{"kruise.io/sidecarset-injected-list: agent", "name: agent"},
			notStdout: []string{"name: bad"},
		},
		{
			name:  "a document over --max-document-bytes once its aliases are expanded is reported and skipped; inject goes on",
			stdin: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\nx: &x " + strings.Repeat("x", 100) + "\ny: [*x, *x, *x, *x, *x, *x, *x, *x, *x, *x]\n---\n" + agent + "\n---\n" + pod,
			args:  []string{"inject", "-f", "-", "--max-document-bytes", "1000"},
			code:  1,
			stderr: []string{
				"<stdin>: document 1: 1252 bytes as JSON, its YAML aliases and escapes expanded, over the limit of 1000 bytes per document (--max-document-bytes)",
			},
			stdout:     []string{"name: one", "IS_INJECTED"},
			stdoutDocs: 1,
		},
		{
			name:  "documents each under --max-document-bytes are bounded together by --max-input-bytes: the first over it is reported, nothing after it is read",
			stdin: agent + "\n---\n" + pod + "\n" + strings.Repeat(aliased, 20) + "---\n" + yamlf(podYAML, "two"),
			args:  []string{"inject", "-f", "-", "--max-input-bytes", "6200"},
			code:  1,
			stderr: []string{
				"<stdin>: document 14: 539 bytes as JSON, its YAML aliases and escapes expanded, bringing the input to 6396 bytes, over the limit of 6200 bytes for the whole input (--max-input-bytes); the rest of the input is not read",
			},
			stdout:     []string{"name: one", "IS_INJECTED"},
			notStdout:  []string{"name: two"},
			stdoutDocs: 1,
		},
		{
			name:  "an escape counts as the JSON it becomes: \\x01 is written as \\u0001, once per alias",
			stdin: strings.Repeat(escaped, 2) + "---\n" + agent,
			args:  []string{"check", "-f", "-", "--max-document-bytes", "1000"},
			code:  1,
			stderr: []string{
				"<stdin>: document 1: 2531 bytes as JSON, its YAML aliases and escapes expanded, over the limit of 1000 bytes per document (--max-document-bytes)",
				"<stdin>: document 2: 2531 bytes as JSON, its YAML aliases and escapes expanded, over the limit of 1000 bytes per document (--max-document-bytes)",
				"0 error(s) in 0 of 1 SidecarSet(s); 2 more elsewhere in the input",
			},
		},
		{
			name:   "standard input is read no further than --max-input-bytes",
			stdin:  strings.Repeat(aliased, 20),
			args:   []string{"check", "-f", "-", "--max-input-bytes", "2000"},
			code:   1,
			stderr: []string{"<stdin>: more than 2000 bytes as written, bringing the input over the limit of 2000 bytes for the whole input (--max-input-bytes); the rest of the input is not read", "0 error(s) in 0 of 0 SidecarSet(s); 1 more elsewhere in the input"},
		},
		{
			name:   "--max-input-bytes must be positive",
			stdin:  pod,
			args:   []string{"check", "-f", "-", "--max-input-bytes", "-1"},
			code:   2,
			stderr: []string{"--max-input-bytes -1: must be positive"},
		},
		{
			name:      "convert takes --max-document-bytes too",
			stdin:     serviceYAML + "\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: shop}",
			args:      []string{"convert", "-f", "-", "--max-document-bytes", "100"},
			code:      1,
			stderr:    []string{"<stdin>: document 1: " + strconv.Itoa(len(serviceYAML)+1) + " bytes as written, over the limit of 100 bytes per document (--max-document-bytes)"},
			stdout:    []string{"kind: Namespace"},
			notStdout: []string{"kind: Service"},
		},
		{
			name:   "--max-document-bytes must be positive",
			stdin:  pod,
			args:   []string{"check", "-f", "-", "--max-document-bytes", "0"},
			code:   2,
			stderr: []string{"--max-document-bytes 0: must be positive"},
		},
		{
			name:  "a document that does not decode does not stop inject",
			stdin: strings.Replace(yamlf(podYAML, "broken"), "image:", "imagee:", 1) + "\n---\n" + agent + "\n---\n" + pod,
			args:  []string{"inject", "-f", "-"},
			code:  1,
			stderr: []string{
				"<stdin>: document 1 (Pod/broken): spec.containers[0].imagee: unknown field",
			},
			stdout:     []string{"name: one", "IS_INJECTED"},
			stdoutDocs: 1,
		},
		{
			name: "a document that does not decode does not stop check from checking the rest",
			stdin: strings.Replace(yamlf(sidecarSetYAML, "typo", "typo"), "image:", "imagee:", 1) + "\n---\n" + agent + "\n---\n" +
				strings.Replace(yamlf(sidecarSetYAML, "bad", "bad"), "matchLabels: {app: web}", "matchExpressions: [{key: app, operator: Sometimes}]", 1),
			args: []string{"check", "-f", "-"},
			code: 1,
			stderr: []string{
				"<stdin>: document 1 (SidecarSet/typo): spec.containers[0].imagee: unknown field",
				// What decodes of it is validated too: without an image, the API server would say so.
				"<stdin>: document 1 (SidecarSet/typo): spec.containers[0].image: Required value",
				`<stdin>: document 3 (SidecarSet/bad): spec.selector.matchExpressions[0].operator: Invalid value: "Sometimes": not a valid selector operator`,
				`<stdin>: document 3 (SidecarSet/bad): spec.selector: Invalid value: "{\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"Sometimes\"}]}": "Sometimes" is not a valid label selector operator`,
				"4 error(s) in 2 of 3 SidecarSet(s)",
			},
		},
		{
			name:   "check's summary counts problems outside SidecarSets apart",
			stdin:  "apiVersion: v1\nkind: Pod\nmetadata: {name: x, z: 1, labels: {app: web}}\nspec: {containers: [{name: c, image: c}]}\n---\n" + agent,
			args:   []string{"check", "-f", "-"},
			code:   1,
			stderr: []string{"<stdin>: document 1 (Pod/x): metadata.z: unknown field", "0 error(s) in 0 of 1 SidecarSet(s); 1 more elsewhere in the input"},
		},
		{
			name:  "of two colliding SidecarSets the first given is injected, the second refused naming it",
			stdin: yamlf(sidecarSetYAML, "first", "proxy") + "\n---\n" + strings.Replace(yamlf(sidecarSetYAML, "second", "proxy"), "agent:1", "agent:2", 1) + "\n---\n" + pod,
			args:  []string{"inject", "-f", "-"},
			code:  1,
			stderr: []string{
				`<stdin>: document 2 (SidecarSet/second): spec.containers[0].name: Invalid value: "proxy": container proxy already exist in first`,
			},
			stdout:    []string{"kruise.io/sidecarset-injected-list: first", "image: agent:1"},
			notStdout: []string{"agent:2"},
		},
		{
			name:   "an empty input is an error",
			stdin:  "# nothing but a comment\n",
			args:   []string{"inject", "-f", "-"},
			code:   1,
			stderr: []string{"no documents found in <stdin>"},
		},
		{
			name:   "a directory that holds only kustomize's configuration is empty input",
			args:   []string{"check", "-f", "cmd/sidecarctl/testdata/kustomize-only"},
			code:   1,
			stderr: []string{"warning: cmd/sidecarctl/testdata/kustomize-only/kustomization.yaml: skipped: kustomize's configuration, not a manifest (read what it builds with `kustomize build cmd/sidecarctl/testdata/kustomize-only` and -f -)", "no documents found in cmd/sidecarctl/testdata/kustomize-only"},
		},
		{
			name:      "inject adds no empty strategy, updateStrategy or resources",
			stdin:     agent + "\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: app, image: app:1}]}\n---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: app, image: app:1}]}",
			args:      []string{"inject", "-f", "-"},
			stdout:    []string{"IS_INJECTED"},
			notStdout: []string{"strategy: {}", "updateStrategy: {}", "resources: {}", "status"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := sidecarctl(t, tt.stdin, tt.args...)
			assert.Equal(t, tt.code, code, errOut)
			var lines []string
			if errOut != "" {
				lines = strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
			}
			assert.Equal(t, tt.stderr, lines)
			for _, s := range tt.stdout {
				assert.Contains(t, out, s)
			}
			for _, s := range tt.notStdout {
				assert.NotContains(t, out, s)
			}
			if tt.stdoutDocs > 0 {
				assert.Len(t, decodeDocs(t, out), tt.stdoutDocs)
			}
		})
	}
}

// `inject --patch` prints, per workload, a patch of that workload: applied to the document as it
// was written, it gives the pod template `inject` prints.
func TestInjectPatchLeadsIntoTheWorkload(t *testing.T) {
	agent := yamlf(sidecarSetYAML, "agent", "agent")
	cronJob := "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec:\n  schedule: '* * * * *'\n  jobTemplate:\n    spec:\n      template:\n" +
		"        metadata: {labels: {app: web}}\n        spec: {restartPolicy: OnFailure, containers: [{name: app, image: app:1}]}"
	for _, tc := range []struct {
		name, workload, prefix string
	}{
		{"Pod", yamlf(podYAML, "one"), "/spec/containers/"},
		{"CronJob", cronJob, "/spec/jobTemplate/spec/template/spec/containers/"},
		{"CloneSet", cloneSetYAML, "/spec/template/spec/containers/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := agent + "\n---\n" + tc.workload
			out, errOut, code := sidecarctl(t, in, "inject", "-f", "-", "-o", "json", "--patch", "--timestamp", ts)
			require.Equal(t, 0, code, errOut)
			var patches []struct {
				APIVersion, Kind, Name string
				Patch                  json.RawMessage
			}
			require.NoError(t, json.Unmarshal([]byte(out), &patches))
			require.Len(t, patches, 1)
			assert.Equal(t, tc.name, patches[0].Kind)
			assert.Contains(t, string(compact(t, patches[0].Patch)), `"path":"`+tc.prefix)

			doc, err := yaml.YAMLToJSON([]byte(tc.workload))
			require.NoError(t, err)
			p, err := jsonpatch.DecodePatch(patches[0].Patch)
			require.NoError(t, err)
			patched, err := p.Apply(doc)
			require.NoError(t, err)

			injected, errOut, code := sidecarctl(t, in, "inject", "-f", "-", "-o", "json", "--timestamp", ts)
			require.Equal(t, 0, code, errOut)
			assert.True(t, apiequality.Semantic.DeepEqual(podOf(t, injected), podOf(t, string(patched))), "%s\n%s", injected, patched)
		})
	}
}

func podOf(t *testing.T, doc string) any {
	t.Helper()
	objs, err := manifest.Decode("doc", []byte(doc))
	require.NoError(t, err)
	require.Len(t, objs, 1)
	pod, ok := manifest.PodTemplate(objs[0].Obj, "")
	require.True(t, ok)
	return pod
}

// OpenKruise compares a SidecarSet's volume or patched annotation with only the last related
// SidecarSet that has it, in its cache's list order, so whether it sees a collision can depend on
// that order. sidecarops compares with every related SidecarSet (decision D8): x, which selects pods
// both a (app=web) and b (app=db) may select, agrees with a and collides with b, and is refused
// naming b whichever of a and b comes first; a and b never meet.
func TestConflictsDoNotDependOnOrder(t *testing.T) {
	sidecarSet := func(name, selector, extra string) string {
		return "apiVersion: apps.kruise.io/v1alpha1\nkind: SidecarSet\nmetadata: {name: " + name + "}\nspec:\n  selector: {matchLabels: {" + selector + "}}\n" +
			"  containers: [{name: c-" + name + ", image: c:1}]\n" + extra
	}
	for _, tc := range []struct {
		name    string
		a, b, x string // what each adds to its spec
		want    string
	}{
		{
			name: "volume",
			a:    "  volumes: [{name: v, hostPath: {path: /a}}]\n",
			b:    "  volumes: [{name: v, emptyDir: {}}]\n",
			x:    "  volumes: [{name: v, hostPath: {path: /a}}]\n",
			want: `spec.volumes[0]: Invalid value: "v": volume v is in conflict with sidecarset b`,
		},
		{
			name: "annotation",
			a:    "  patchPodMetadata: [{annotations: {example.com/k: '{\"a\":1}'}, patchPolicy: MergePatchJson}]\n",
			b:    "  patchPodMetadata: [{annotations: {example.com/k: v}, patchPolicy: Overwrite}]\n",
			x:    "  patchPodMetadata: [{annotations: {example.com/k: '{\"b\":2}'}, patchPolicy: MergePatchJson}]\n",
			want: `spec.patchPodMetadata[0].annotations[example.com/k]: Invalid value: "example.com/k": annotation example.com/k is in conflict with sidecarset b`,
		},
	} {
		a, b, x := sidecarSet("a", "app: web", tc.a), sidecarSet("b", "app: db", tc.b), sidecarSet("x", "tier: t", tc.x)
		for order, docs := range map[string][]string{"a, b, x": {a, b, x}, "b, a, x": {b, a, x}} {
			t.Run(tc.name+"/"+order, func(t *testing.T) {
				_, errOut, code := sidecarctl(t, strings.Join(docs, "---\n"), "check", "-f", "-", "--patch-metadata-defaults-allowed")
				assert.Equal(t, 1, code)
				assert.Equal(t, []string{"<stdin>: document 3 (SidecarSet/x): " + tc.want, "1 error(s) in 1 of 3 SidecarSet(s)"},
					strings.Split(strings.TrimSpace(errOut), "\n"))
			})
		}
	}
}
