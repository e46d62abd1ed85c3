package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
)

// names renders objects as their String(), which carries source, document, item, kind and name.
func names(objs []*Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.String()
	}
	return out
}

// errorLines splits an error into its lines, checking on the way that it is an Errors whose
// entries are one line each.
func errorLines(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var es Errors
	require.True(t, errors.As(err, &es), "error is %T, want Errors", err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, len(es))
	for i, e := range es {
		assert.Equal(t, lines[i], e.Error())
	}
	return lines
}

const pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n"

func pods(names ...string) string {
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.WriteString(strings.ReplaceAll(pod, "%s", n))
	}
	return b.String()
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name   string
		source string
		in     string
		want   []string // Object.String() of every object
		errs   []string // every error line
		warns  []string // every warning line
	}{
		{
			name: "multi-document YAML counts documents as a reader does",
			in: "# leading comment, not a document\n---\n" + pods("a") + "---\n---\n# only a comment\n---\n" +
				pods("b") + "...\n" + pods("c") + "---\n",
			want: []string{"f.yaml: document 1 (Pod/a)", "f.yaml: document 4 (Pod/b)", "f.yaml: document 5 (Pod/c)"},
		},
		{
			name: "separator with trailing comment, CRLF line ends, byte order mark",
			in:   "\xef\xbb\xbf" + strings.ReplaceAll(pods("a")+"--- # next\n"+pods("b"), "\n", "\r\n"),
			want: []string{"f.yaml: document 1 (Pod/a)", "f.yaml: document 2 (Pod/b)"},
		},
		{
			name: "an empty source has no objects and no error",
			in:   "\n# nothing here\n",
		},
		{
			name: "JSON object",
			in:   `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}`,
			want: []string{"f.yaml: document 1 (Pod/a)"},
		},
		{
			name: "JSON stream",
			in: "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"a\"}}\n\n" +
				`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"}}{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "c"}}`,
			want: []string{"f.yaml: document 1 (Pod/a)", "f.yaml: document 2 (Pod/b)", "f.yaml: document 3 (Pod/c)"},
		},
		{
			name: "flow-style YAML that starts like JSON",
			in:   "{apiVersion: v1, kind: Pod, metadata: {name: a}}\n---\n" + pods("b"),
			want: []string{"f.yaml: document 1 (Pod/a)", "f.yaml: document 2 (Pod/b)"},
		},
		{
			name: "v1/List in YAML is expanded in order; null items are empty documents",
			in: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a}\n- null\n" +
				"- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: b}\n---\n" + pods("c"),
			want: []string{"f.yaml: document 1 items[0] (Pod/a)", "f.yaml: document 1 items[2] (Deployment/b)", "f.yaml: document 2 (Pod/c)"},
		},
		{
			name: "v1/List in JSON",
			in:   `{"apiVersion": "v1", "kind": "List", "metadata": {}, "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}]}`,
			want: []string{"f.yaml: document 1 items[0] (Pod/a)"},
		},
		{
			name: "empty v1/List",
			in:   "apiVersion: v1\nkind: List\nitems: []\n",
		},
		{
			name:   "the example of the brief",
			source: "examples/bad.yaml",
			in: pods("web") + "---\napiVersion: apps.kruise.io/v1alpha1\nkind: SidecarSet\nmetadata:\n  name: logging\nspec:\n" +
				"  containers:\n  - name: log\n    imagee: fluent-bit\n",
			want: []string{"examples/bad.yaml: document 1 (Pod/web)"},
			errs: []string{"examples/bad.yaml:13: document 2 (SidecarSet/logging): spec.containers[0].imagee: unknown field"},
		},
		{
			name: "unknown fields at every depth, all reported",
			in:   "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  lables: {}\nspec:\n  template:\n    spec:\n      containers:\n      - name: a\n      - name: b\n        imagee: x\n        env: [{name: A, vaule: x}]\nstatuz: {}\n",
			errs: []string{
				"f.yaml:5: document 1 (Deployment/d): metadata.lables: unknown field",
				"f.yaml:12: document 1 (Deployment/d): spec.template.spec.containers[1].imagee: unknown field",
				"f.yaml:13: document 1 (Deployment/d): spec.template.spec.containers[1].env[0].vaule: unknown field",
				"f.yaml:14: document 1 (Deployment/d): statuz: unknown field",
			},
		},
		{
			name: "unknown field in a SidecarSet's schemaless parts (containers, volumes)",
			in:   "apiVersion: apps.kruise.io/v1alpha1\nkind: SidecarSet\nmetadata: {name: s}\nspec:\n  containers: [{name: a, image: b, podInjectionPolicy: AfterAppContainer}]\n  volumes: [{name: v, emptyDirr: {}}]\n",
			errs: []string{
				"f.yaml:5: document 1 (SidecarSet/s): spec.containers[0].podInjectionPolicy: unknown field",
				"f.yaml:6: document 1 (SidecarSet/s): spec.volumes[0].emptyDirr: unknown field",
			},
		},
		{
			name: "duplicate fields in YAML warn, with their path: kubectl keeps the last value and sends it on",
			in:   "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels:\n    app: x\n    app: y\n    app: z\nspec:\n  containers:\n  - name: c\n    image: i\n    name: d\n",
			want: []string{"f.yaml: document 1 (Pod/a)"},
			warns: []string{
				"f.yaml:8: document 1 (Pod/a): metadata.labels.app: duplicate field: the last value is kept, as kubectl keeps it",
				"f.yaml:13: document 1 (Pod/a): spec.containers[0].name: duplicate field: the last value is kept, as kubectl keeps it",
			},
		},
		{
			name:  "duplicate fields in JSON warn likewise",
			in:    `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "name": "b"}}`,
			want:  []string{"f.yaml: document 1 (Pod/b)"},
			warns: []string{"f.yaml:1: document 1 (Pod/b): metadata.name: duplicate field: the last value is kept, as kubectl keeps it"},
		},
		{
			name:  "duplicate field inside a List item, found in the YAML of the List",
			in:    "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  kind: Pod\n  metadata: {name: a}\n",
			want:  []string{"f.yaml: document 1 items[0] (Pod/a)"},
			warns: []string{"f.yaml:6: document 1 (List): items[0].kind: duplicate field: the last value is kept, as kubectl keeps it"},
		},
		{
			name: "duplicate fields in a document passed through, and in an OpenKruise workload",
			in:   `{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"a": 1, "a": 2}}` + "\n" + `{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "metadata": {"name": "c"}, "spec": {"replicas": 1, "replicas": 2}}`,
			want: []string{"f.yaml: document 1 (Service/s)", "f.yaml: document 2 (CloneSet/c)"},
			warns: []string{
				"f.yaml:1: document 1 (Service/s): spec.a: duplicate field: the last value is kept, as kubectl keeps it",
				"f.yaml:2: document 2 (CloneSet/c): spec.replicas: duplicate field: the last value is kept, as kubectl keeps it",
			},
		},
		{
			name:  "a duplicate in a document with errors still warns",
			in:    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  name: b\n  x: 1\n",
			errs:  []string{"f.yaml:6: document 1 (Pod/b): metadata.x: unknown field"},
			warns: []string{"f.yaml:5: document 1 (Pod/b): metadata.name: duplicate field: the last value is kept, as kubectl keeps it"},
		},
		{
			name: "a YAML merge key may be overridden: not a duplicate",
			in:   "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels:\n    <<: {app: x, tier: t}\n    app: z\n",
			want: []string{"f.yaml: document 1 (Pod/a)"},
		},
		{
			name: "wrong types, with indices, all reported",
			in: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: three\n  template:\n    spec:\n" +
				"      containers:\n      - name: a\n        ports: [{containerPort: 80}, {containerPort: 1.5}, {containerPort: 10000000000}]\n" +
				"        resources: {limits: {cpu: 1GBx}}\n      - name: b\n        image: [x]\n        tty: \"yes\"\n      hostNetwork: 1\n",
			errs: []string{
				"f.yaml:5: document 1 (Deployment/d): spec.replicas: expected int32, got string",
				"f.yaml:10: document 1 (Deployment/d): spec.template.spec.containers[0].ports[1].containerPort: expected int32, got 1.5",
				"f.yaml:10: document 1 (Deployment/d): spec.template.spec.containers[0].ports[2].containerPort: expected int32, got 10000000000",
				"f.yaml:11: document 1 (Deployment/d): spec.template.spec.containers[0].resources.limits.cpu: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
				"f.yaml:13: document 1 (Deployment/d): spec.template.spec.containers[1].image: expected string, got array",
				"f.yaml:14: document 1 (Deployment/d): spec.template.spec.containers[1].tty: expected boolean, got string",
				"f.yaml:15: document 1 (Deployment/d): spec.template.spec.hostNetwork: expected boolean, got 1",
			},
		},
		{
			name: "wrong type of a whole section and of an int-or-string",
			in:   "apiVersion: apps.kruise.io/v1alpha1\nkind: SidecarSet\nmetadata: {name: s}\nspec:\n  selector: app=web\n  updateStrategy: {maxUnavailable: true}\n",
			errs: []string{
				"f.yaml:5: document 1 (SidecarSet/s): spec.selector: expected object, got string",
				"f.yaml:6: document 1 (SidecarSet/s): spec.updateStrategy.maxUnavailable: cannot unmarshal bool into Go value of type int32",
			},
		},
		{
			name: "missing apiVersion, kind, both; wrong types of them",
			in:   "kind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\n---\nmetadata: {name: c}\n---\napiVersion: 1\nkind: [Pod]\n---\napiVersion: a/b/c\nkind: Pod\n",
			errs: []string{
				"f.yaml:1: document 1 (Pod/a): apiVersion: missing",
				"f.yaml:4: document 2: kind: missing",
				"f.yaml:6: document 3 (name \"c\"): apiVersion: missing",
				"f.yaml:6: document 3 (name \"c\"): kind: missing",
				"f.yaml:8: document 4: apiVersion: expected string, got 1",
				"f.yaml:9: document 4: kind: expected string, got array",
				"f.yaml:11: document 5 (Pod): apiVersion: unexpected GroupVersion string: a/b/c",
			},
		},
		{
			name: "kinds of other groups pass through; a kind of a group read here in another version is refused",
			in: "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\napiVersion: apps.kruise.io/v2\nkind: SidecarSet\nmetadata: {name: t}\n" +
				"---\napiVersion: apps/v1beta1\nkind: Deployment\n---\napiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: List}]\n" +
				"---\napiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: vj}\n---\napiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: old}\n" +
				"---\napiVersion: apps.kruise.io/v1alpha1\nkind: UnitedDeployment\nmetadata: {name: ud}\n",
			want: []string{"f.yaml: document 1 (Service/s)", "f.yaml: document 5 (Job/vj)", "f.yaml: document 6 (Deployment/old)", "f.yaml: document 7 (UnitedDeployment/ud)"},
			errs: []string{
				"f.yaml:5: document 2 (SidecarSet/t): apiVersion: unsupported apiVersion \"apps.kruise.io/v2\" for kind SidecarSet (supported: apps.kruise.io/v1alpha1, apps.kruise.io/v1beta1)",
				"f.yaml:9: document 3 (Deployment): apiVersion: unsupported apiVersion \"apps/v1beta1\" for kind Deployment (supported: apps/v1)",
				"f.yaml:14: document 4 items[0] (List): kind: a List inside a List is not supported",
			},
		},
		{
			name: "OpenKruise's workloads: metadata and the pod template are checked, the rest is OpenKruise's",
			in: "apiVersion: apps.kruise.io/v1alpha1\nkind: CloneSet\nmetadata: {name: c, lables: {}}\nspec:\n  scaleStrategy: {anything: goes}\n  template:\n" +
				"    spec:\n      containers: [{name: a, imagee: x}]\n---\napiVersion: apps.kruise.io/v1beta1\nkind: StatefulSet\nmetadata: {name: s}\nspec: {template: {spec: {hostNetwork: 1}}}\n" +
				"---\napiVersion: apps.kruise.io/v1alpha1\nkind: BroadcastJob\nmetadata: {name: b}\nspec: [x]\n---\napiVersion: apps.kruise.io/v1alpha1\nkind: DaemonSet\nmetadata: {name: d}\nspec: {}\n",
			want: []string{"f.yaml: document 4 (DaemonSet/d)"},
			errs: []string{
				"f.yaml:3: document 1 (CloneSet/c): metadata.lables: unknown field",
				"f.yaml:8: document 1 (CloneSet/c): spec.template.spec.containers[0].imagee: unknown field",
				"f.yaml:13: document 2 (StatefulSet/s): spec.template.spec.hostNetwork: expected boolean, got 1",
				"f.yaml:18: document 3 (BroadcastJob/b): spec: expected object, got array",
			},
		},
		{
			name: "documents that are not objects",
			in:   "- a\n- b\n---\njust a string\n---\n42\n",
			errs: []string{
				"f.yaml:1: document 1: expected an object, got array",
				"f.yaml:4: document 2: expected an object, got string",
				"f.yaml:6: document 3: expected an object, got 42",
			},
		},
		{
			name: "errors in List items name the item; the List contributes nothing",
			in:   "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a}\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: b}\n  spec: {containerz: []}\n- kind: Pod\n",
			errs: []string{
				"f.yaml:10: document 1 items[1] (Pod/b): spec.containerz: unknown field",
				"f.yaml:11: document 1 items[2] (Pod): apiVersion: missing",
			},
		},
		{
			name: "malformed YAML: the line is the file's, and later documents are still read",
			in:   pods("a") + "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n labels: {}\n---\n" + pods("c") + "---\nfoo: [\n",
			want: []string{"f.yaml: document 1 (Pod/a)", "f.yaml: document 3 (Pod/c)"},
			errs: []string{
				"f.yaml:10: document 2: did not find expected key",
				"f.yaml:18: document 4: did not find expected node content", // the end of the file
			},
		},
		{
			name: "malformed YAML: scanner errors",
			in:   pods("a") + "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: x: y\n---\napiVersion: v1\n\tkind: Pod\n",
			want: []string{"f.yaml: document 1 (Pod/a)"},
			errs: []string{
				"f.yaml:9: document 2: mapping values are not allowed in this context",
				"f.yaml:12: document 3: found a tab character that violates indentation",
			},
		},
		{
			name: "content after a YAML document's node is not silently dropped",
			in:   "{apiVersion: v1, kind: Pod}\nmetadata: {name: a}\n",
			errs: []string{"f.yaml:1: document 1: invalid character 'a' looking for beginning of object key string"},
		},
		{
			name: "content after a YAML flow node in a later document",
			in:   pods("a") + "---\n[1]\n[2]\n",
			want: []string{"f.yaml: document 1 (Pod/a)"},
			errs: []string{"f.yaml:7: document 2: did not find expected <document start>"},
		},
		{
			name: "malformed JSON stream: earlier objects are kept, the line is given",
			in:   "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"a\"}}\n{\"apiVersion\": \"v1\",\n \"kind\": \"Pod\",}\n",
			want: []string{"f.yaml: document 1 (Pod/a)"},
			errs: []string{"f.yaml:3: document 2: invalid character '}' looking for beginning of object key string"},
		},
		{
			name: "truncated JSON",
			in:   "{\"apiVersion\": \"v1\",\n\"kind\": \"Pod\"",
			errs: []string{"f.yaml:2: document 1: unexpected EOF"},
		},
		{
			name: "line breaks in keys are escaped: one error, one line",
			in:   "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {\"x\\ny\": 1}\n",
			errs: []string{"f.yaml:4: document 1 (Pod/a): spec.x\\ny: unknown field"},
		},
		{
			name: "nesting deeper than the JSON decoder reads is said so, not \"expected object, got object\"",
			in: "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {deep: " +
				strings.Repeat("{a: ", 9999) + "1" + strings.Repeat("}", 9999) + "}\n---\n" + pods("b"),
			want: []string{"f.yaml: document 2 (Pod/b)"},
			errs: []string{"f.yaml:1: document 1: nested too deeply: exceeded the JSON decoder's maximum depth"},
		},
		{
			name: "a string of the right kind but not base64 says why, not \"expected base64 string, got string\"",
			in:   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\nbinaryData: {a: !!binary aGVsbG8=}\n",
			errs: []string{"f.yaml:4: document 1 (ConfigMap/c): binaryData.a: illegal base64 data at input byte 4"},
		},
		{
			name: "a number no Go number holds, where any value goes, says so, not \"expected any value, got object\"",
			in:   `{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"a": 1e400}}`,
			errs: []string{"f.yaml:1: document 1 (Widget/w): spec: cannot unmarshal number 1e400 into Go value of type float64"},
		},
		{
			name: "YAML's infinity has no JSON form",
			in:   "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {a: .inf}\n",
			errs: []string{"f.yaml: document 1: +Inf has no JSON form: JSON numbers have no infinity or NaN (YAML's .inf, .nan)"},
		},
		{
			name: "errors and objects across many documents keep input order",
			in:   pods("a") + "---\nkind: X\n---\n" + pods("b") + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: c, x: 1}\n",
			want: []string{"f.yaml: document 1 (Pod/a)", "f.yaml: document 3 (Pod/b)"},
			errs: []string{
				"f.yaml:6: document 2 (X): apiVersion: missing",
				"f.yaml:15: document 4 (Pod/c): metadata.x: unknown field",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			source := tt.source
			if source == "" {
				source = "f.yaml"
			}
			in := DecodeInput(source, []byte(tt.in))
			assert.Equal(t, tt.want, nilIfEmpty(names(in.Objects)))
			assert.Equal(t, tt.errs, errorLines(t, in.Errors.err()))
			assert.Equal(t, tt.warns, errorLines(t, in.Warnings.err()))
			for i, o := range in.Objects {
				assert.Equal(t, i, o.Index)
			}
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func TestDecodeEveryKind(t *testing.T) {
	data, err := os.ReadFile("testdata/kinds.yaml")
	require.NoError(t, err)
	objs, err := Decode("kinds.yaml", data)
	require.NoError(t, err)
	want := []any{
		&v1alpha1.SidecarSet{}, &corev1.Namespace{}, &appsv1.ControllerRevision{}, &corev1.ConfigMap{},
		&corev1.Pod{}, &appsv1.Deployment{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}, &appsv1.ReplicaSet{},
		&batchv1.Job{}, &batchv1.CronJob{},
	}
	require.Len(t, objs, len(want))
	for i, o := range objs {
		assert.IsType(t, want[i], o.Obj)
		gvk := o.Obj.GetObjectKind().GroupVersionKind()
		assert.Equal(t, kindsByT[reflect.TypeOf(o.Obj)].gvk, gvk, "TypeMeta is kept")
		assert.Equal(t, Position{Source: "kinds.yaml", Doc: i + 1, Item: -1}, o.Position)
	}
	// Spot checks that values land in the typed fields.
	ss := objs[0].Obj.(*v1alpha1.SidecarSet)
	assert.Equal(t, "fluent-bit:2.2", ss.Spec.Containers[0].Image)
	assert.Equal(t, v1beta1.AfterAppContainerType, ss.Spec.Containers[0].PodInjectPolicy)
	assert.Equal(t, "10%", ss.Spec.UpdateStrategy.MaxUnavailable.String())
	assert.Equal(t, "100m", ss.Spec.Containers[0].Resources.Limits.Cpu().String())
	cr := objs[2].Obj.(*appsv1.ControllerRevision)
	assert.Equal(t, int64(2), cr.Revision)
	assert.JSONEq(t, `{"spec":{"containers":[{"name":"log-agent","image":"fluent-bit:2.1"}]}}`, string(cr.Data.Raw))
	cj := objs[10].Obj.(*batchv1.CronJob)
	assert.Equal(t, "report:1", cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image)
}

func TestRead(t *testing.T) {
	tmp := t.TempDir()
	writeFile := func(name, content string) string {
		p := filepath.Join(tmp, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	txt := writeFile("explicit/pod.txt", pods("txt"))
	bad := writeFile("bad/x.yaml", "kind: Pod\n")
	writeFile("bad/y.json", `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "y", "x": 1}}`)
	kustomized := filepath.Dir(writeFile("kustomized/kustomization.yaml", "resources: [pod.yaml]\n"))
	writeFile("kustomized/pod.yaml", pods("k"))
	onlyKustomization := filepath.Dir(writeFile("only/kustomization.yml", "resources: []\n"))
	empty := filepath.Join(tmp, "empty")
	require.NoError(t, os.Mkdir(empty, 0o755))
	missing := filepath.Join(tmp, "missing.yaml")

	tree := filepath.Join("testdata", "tree")
	tests := []struct {
		name  string
		stdin string
		paths []string
		want  []string
		errs  []string
		warns []string
	}{
		{
			name:  "directory: recursive, lexical order, manifest extensions only",
			paths: []string{tree},
			want: []string{
				"testdata/tree/a.json: document 1 (Namespace/a1)",
				"testdata/tree/a.json: document 2 items[0] (Namespace/a2)",
				"testdata/tree/a.json: document 2 items[1] (Namespace/a3)",
				"testdata/tree/b.yaml: document 1 (Namespace/b1)",
				"testdata/tree/b.yaml: document 2 (Namespace/b2)",
				"testdata/tree/sub/c.yml: document 1 (Namespace/c1)",
				"testdata/tree/z/d.yaml: document 1 (Namespace/d1)",
			},
		},
		{
			name:  "files, stdin and directories in the order given",
			stdin: pods("in"),
			paths: []string{"testdata/tree/z/d.yaml", Stdin, txt},
			want: []string{
				"testdata/tree/z/d.yaml: document 1 (Namespace/d1)",
				"<stdin>: document 1 (Pod/in)",
				txt + ": document 1 (Pod/txt)",
			},
		},
		{
			name:  "stdin given twice",
			stdin: pods("in"),
			paths: []string{Stdin, Stdin},
			want:  []string{"<stdin>: document 1 (Pod/in)"},
			errs:  []string{"<stdin>: standard input given more than once"},
		},
		{
			name:  "errors of every file are collected",
			paths: []string{missing, empty, filepath.Dir(bad), "testdata/tree/sub/c.yml"},
			want:  []string{"testdata/tree/sub/c.yml: document 1 (Namespace/c1)"},
			errs: []string{
				missing + ": stat: no such file or directory",
				empty + ": directory holds no *.yaml, *.yml or *.json file",
				bad + ":1: document 1 (Pod): apiVersion: missing",
				filepath.Join(filepath.Dir(bad), "y.json") + ":1: document 1 (Pod/y): metadata.x: unknown field",
			},
		},
		{
			name:  "kustomize's configuration in a directory is skipped, with a warning",
			paths: []string{kustomized, onlyKustomization},
			want:  []string{filepath.Join(kustomized, "pod.yaml") + ": document 1 (Pod/k)"},
			warns: []string{
				filepath.Join(kustomized, "kustomization.yaml") + ": skipped: kustomize's configuration, not a manifest (read what it builds with `kustomize build " + kustomized + "` and -f -)",
				filepath.Join(onlyKustomization, "kustomization.yml") + ": skipped: kustomize's configuration, not a manifest (read what it builds with `kustomize build " + onlyKustomization + "` and -f -)",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := ReadInput(strings.NewReader(tt.stdin), tt.paths...)
			assert.Equal(t, tt.want, nilIfEmpty(names(in.Objects)))
			assert.Equal(t, tt.errs, errorLines(t, in.Errors.err()))
			assert.Equal(t, tt.warns, errorLines(t, in.Warnings.err()))
			for i, o := range in.Objects {
				assert.Equal(t, i, o.Index)
			}
			objs, err := Read(strings.NewReader(tt.stdin), tt.paths...)
			assert.Equal(t, names(in.Objects), names(objs), "Read is ReadInput without the warnings")
			assert.Equal(t, in.Errors.err(), err)
		})
	}

	t.Run("no stdin", func(t *testing.T) {
		_, err := Read(nil, Stdin)
		assert.Equal(t, []string{"<stdin>: standard input is not available"}, errorLines(t, err))
	})
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		err  Error
		want string
	}{
		{Error{Position: Position{Source: "a.yaml", Doc: 2, Item: -1}, Kind: "SidecarSet", Name: "logging", Field: "spec.x", Reason: "unknown field"},
			"a.yaml: document 2 (SidecarSet/logging): spec.x: unknown field"},
		{Error{Position: Position{Source: "a.yaml", Doc: 1, Item: 3}, Kind: "Pod", Field: "spec", Reason: "r"},
			"a.yaml: document 1 items[3] (Pod): spec: r"},
		{Error{Position: Position{Source: "a.yaml", Doc: 4, Item: -1}, Line: 7, Reason: "bad\nthing"},
			`a.yaml:7: document 4: bad\nthing`},
		{Error{Position: Position{Source: "dir", Item: -1}, Reason: "r"}, "dir: r"},
		{Error{Position: Position{Item: -1}, Kind: "ConfigMap", Name: "c", Field: "data[k]", Reason: "r"}, "ConfigMap/c: data[k]: r"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.err.Error())
	}
	assert.Equal(t, "", Errors(nil).Error())
	assert.NoError(t, Errors(nil).err())
	assert.Equal(t, reflect.TypeFor[Errors](), reflect.TypeOf(Errors{{}}.err()))
}
