package bundles

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarops/sidecarops/api/v1beta1"
)

func sidecarSet(name string, sel *metav1.LabelSelector, mutate ...func(*v1beta1.SidecarSet)) *v1beta1.SidecarSet {
	ss := &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta1.SidecarSetSpec{
			Selector:   sel,
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

// compileBundle is the bundle of st compiled from scratch, as sidecarctl compile writes it.
func compileBundle(st State) (*bundle.Bundle, error) {
	b, err := new(Builder).Build(st)
	if err != nil {
		return nil, err
	}
	return b.Bundle()
}

func labels(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

// indexAndReference evaluates, for one pod, the generated index's matches and the match policy's
// reference judgement match.applies over every SidecarSet document, in the compiled bundle.
func indexAndReference(t *testing.T, b *bundle.Bundle, ns string, podLabels map[string]string) (index, reference []string) {
	t.Helper()
	// A pod without labels has no labels field at all (omitempty), as the webhook receives it.
	meta := map[string]any{}
	if len(podLabels) > 0 {
		meta["labels"] = podLabels
	}
	pod := map[string]any{"metadata": meta}
	rs, err := rego.New(
		rego.Query(`index := sort(data.sidecarops.index.matches)
			reference := sort([name | some name, ss in data.sidecarops.state.sidecarsets; data.sidecarops.match.applies(ss)])`),
		rego.ParsedBundle("core", b),
		rego.Input(map[string]any{"namespace": ns, "pod": pod}),
	).Eval(context.Background())
	require.NoError(t, err)
	require.Len(t, rs, 1)
	return strs(rs[0].Bindings["index"]), strs(rs[0].Bindings["reference"])
}

func strs(v any) []string {
	out := []string{}
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func expr(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
}

func TestIndexModuleMatches(t *testing.T) {
	sets := []*v1beta1.SidecarSet{
		sidecarSet("by-app", labels("app", "web")),
		sidecarSet("by-two", labels("app", "web", "tier", "front")),
		sidecarSet("odd-key", labels("app.kubernetes.io/name", `we"b\`)),
		sidecarSet("scoped", labels("app", "web"), func(ss *v1beta1.SidecarSet) { ss.Spec.NamespaceSelector = v1beta1.NamespaceNamed("shop") }),
		sidecarSet("scoped-by-selector", labels("app", "web"), func(ss *v1beta1.SidecarSet) {
			ss.Spec.NamespaceSelector = labels(v1beta1.NamespaceNameLabel, "bank")
		}),
		sidecarSet("prod-namespaces", labels("app", "web"), func(ss *v1beta1.SidecarSet) {
			ss.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{expr("env", metav1.LabelSelectorOpIn, "prod")}}
		}),
		sidecarSet("in-only", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{expr("app", metav1.LabelSelectorOpIn, "api", "web")}}),
		sidecarSet("exists-not-canary", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			expr("app", metav1.LabelSelectorOpExists), expr("track", metav1.LabelSelectorOpNotIn, "canary"), expr("legacy", metav1.LabelSelectorOpDoesNotExist)}}),
		sidecarSet("paused", labels("app", "web"), func(ss *v1beta1.SidecarSet) { ss.Spec.InjectionStrategy.Paused = true }),
		// Only negated terms: they hold for a pod without labels (labels.Requirement.Matches).
		sidecarSet("not-legacy-db", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			expr("legacy", metav1.LabelSelectorOpDoesNotExist), expr("app", metav1.LabelSelectorOpNotIn, "db")}}),
		sidecarSet("nil-selector", nil),
		sidecarSet("empty-selector", &metav1.LabelSelector{}),
		// 4 × 5 values would be 20 rules, more than maxSplitRules: the second In stays a test.
		sidecarSet("many-values", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}, MatchExpressions: []metav1.LabelSelectorRequirement{
			expr("tier", metav1.LabelSelectorOpIn, "front", "back", "a", "b", "b"), expr("zone", metav1.LabelSelectorOpIn, "z1", "z2", "z3", "z4", "z5")}}),
	}
	b, err := compileBundle(State{SidecarSets: sets, Namespaces: []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "bank", Labels: map[string]string{"env": "prod"}}},
	}})
	require.NoError(t, err)
	cases := []struct {
		name   string
		ns     string
		labels map[string]string
		want   []string
	}{
		{"web in shop", "shop", map[string]string{"app": "web"}, []string{"by-app", "exists-not-canary", "in-only", "not-legacy-db", "scoped"}},
		{"web front in bank (env=prod)", "bank", map[string]string{"app": "web", "tier": "front"},
			[]string{"by-app", "by-two", "exists-not-canary", "in-only", "not-legacy-db", "prod-namespaces", "scoped-by-selector"}},
		{"canary api elsewhere", "x", map[string]string{"app": "api", "track": "canary"}, []string{"in-only", "not-legacy-db"}},
		{"legacy", "x", map[string]string{"app": "db", "legacy": ""}, []string{}},
		{"db", "x", map[string]string{"app": "db"}, []string{"exists-not-canary"}},
		{"escaped key and value", "x", map[string]string{"app.kubernetes.io/name": `we"b\`}, []string{"not-legacy-db", "odd-key"}},
		{"no labels", "x", nil, []string{"not-legacy-db"}},
		{"both Ins hold", "x", map[string]string{"app": "web", "tier": "b", "zone": "z5"},
			[]string{"by-app", "exists-not-canary", "in-only", "many-values", "not-legacy-db"}},
		{"the second In fails", "x", map[string]string{"app": "web", "tier": "b", "zone": "z6"},
			[]string{"by-app", "exists-not-canary", "in-only", "not-legacy-db"}},
	}
	// The first In is split into its four values; with the second, twenty rules would be too many.
	assert.Equal(t, 4, strings.Count(IndexRules(sets[len(sets)-1]), "matches contains"))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			index, reference := indexAndReference(t, b, tc.ns, tc.labels)
			assert.Equal(t, tc.want, index)
			assert.Equal(t, reference, index, "the generated index must judge as match.applies")
		})
	}
}

// TestIndexModuleAgreesWithPolicy is a property test: over random selectors (every operator), namespace
// scopes, paused flags, pods and namespaces, the generated index and match.applies agree.
func TestIndexModuleAgreesWithPolicy(t *testing.T) {
	rnd := mathrand.New(mathrand.NewPCG(7, 11))
	keys := []string{"app", "tier", "env"}
	values := []string{"a", "b", "c"}
	pick := func(xs []string) string { return xs[rnd.IntN(len(xs))] }
	randSelector := func() *metav1.LabelSelector {
		if rnd.IntN(10) == 0 {
			return nil
		}
		sel := &metav1.LabelSelector{}
		for i := rnd.IntN(3); i > 0; i-- {
			if sel.MatchLabels == nil {
				sel.MatchLabels = map[string]string{}
			}
			sel.MatchLabels[pick(keys)] = pick(values)
		}
		ops := []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}
		for i := rnd.IntN(3); i > 0; i-- {
			op := ops[rnd.IntN(len(ops))]
			var vs []string
			if op == metav1.LabelSelectorOpIn || op == metav1.LabelSelectorOpNotIn {
				for j := 1 + rnd.IntN(2); j > 0; j-- {
					vs = append(vs, pick(values))
				}
			}
			sel.MatchExpressions = append(sel.MatchExpressions, expr(pick(keys), op, vs...))
		}
		return sel
	}
	randLabels := func() map[string]string {
		m := map[string]string{}
		for _, k := range keys {
			if rnd.IntN(3) > 0 {
				m[k] = pick(values)
			}
		}
		return m
	}
	namespaces := []string{"n1", "n2", "n3"}
	matched, judged := 0, 0
	for round := 0; round < 15; round++ {
		var sets []*v1beta1.SidecarSet
		for i := 0; i < 20; i++ {
			ss := sidecarSet(fmt.Sprintf("ss-%d", i), randSelector())
			switch rnd.IntN(5) {
			case 0:
				ss.Spec.NamespaceSelector = v1beta1.NamespaceNamed(pick(namespaces))
			case 2:
				// Namespaces by name, the way OpenKruise users list several: an In on the name
				// label, with or without other terms.
				ss.Spec.NamespaceSelector = randSelector()
				if ss.Spec.NamespaceSelector == nil || rnd.IntN(2) == 0 {
					ss.Spec.NamespaceSelector = &metav1.LabelSelector{}
				}
				ss.Spec.NamespaceSelector.MatchExpressions = append(ss.Spec.NamespaceSelector.MatchExpressions,
					expr(v1beta1.NamespaceNameLabel, metav1.LabelSelectorOpIn, pick(namespaces), pick(namespaces)))
			case 1:
				ss.Spec.NamespaceSelector = randSelector()
				if rnd.IntN(2) == 0 && ss.Spec.NamespaceSelector != nil {
					if ss.Spec.NamespaceSelector.MatchLabels == nil {
						ss.Spec.NamespaceSelector.MatchLabels = map[string]string{}
					}
					ss.Spec.NamespaceSelector.MatchLabels[v1beta1.NamespaceNameLabel] = pick(namespaces)
				}
			}
			ss.Spec.InjectionStrategy.Paused = rnd.IntN(8) == 0
			sets = append(sets, ss)
		}
		var nsObjs []*corev1.Namespace
		for _, n := range namespaces[:2] { // n3 stays unknown: only its name label
			nsObjs = append(nsObjs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: randLabels()}})
		}
		b, err := compileBundle(State{SidecarSets: sets, Namespaces: nsObjs})
		require.NoError(t, err)
		for p := 0; p < 20; p++ {
			ns, podLabels := pick(namespaces), randLabels()
			index, reference := indexAndReference(t, b, ns, podLabels)
			require.Equal(t, reference, index, "round %d, pod %v in %s\n%s", round, podLabels, ns, b.Modules)
			matched += len(index)
			judged += len(sets)
		}
	}
	// The generator must exercise both outcomes for the agreement to mean anything.
	assert.Greater(t, matched, judged/50, "too few matches: %d of %d", matched, judged)
	assert.Less(t, matched, judged/2, "too many matches: %d of %d", matched, judged)
}

func TestCompileRejectsDuplicateNames(t *testing.T) {
	_, err := compileBundle(State{SidecarSets: []*v1beta1.SidecarSet{sidecarSet("a", labels("x", "y")), sidecarSet("a", labels("x", "z"))}})
	require.ErrorContains(t, err, "SidecarSet/a: metadata.name: duplicate SidecarSet name")
}

func TestCompileRevisionIsContentHash(t *testing.T) {
	st := State{SidecarSets: []*v1beta1.SidecarSet{sidecarSet("a", labels("app", "web"))}}
	b1, err := compileBundle(st)
	require.NoError(t, err)
	b2, err := compileBundle(st)
	require.NoError(t, err)
	assert.Equal(t, b1.Manifest.Revision, b2.Manifest.Revision, "same content, same revision")
	st.SidecarSets = append(st.SidecarSets, sidecarSet("b", labels("app", "api")))
	b3, err := compileBundle(st)
	require.NoError(t, err)
	assert.NotEqual(t, b1.Manifest.Revision, b3.Manifest.Revision)
	assert.Equal(t, []string{Root}, *b3.Manifest.Roots)
}

// A v1alpha1 spec.namespace reaches the policies as the namespaceSelector it converts into (the
// conversion, and that spec.namespace wins over a namespaceSelector, are api/v1alpha1's tests).
func TestNormalizeNamespaceSelectorAndCanary(t *testing.T) {
	ss := sidecarSet("a", labels("app", "web"), func(ss *v1beta1.SidecarSet) {
		ss.Spec.NamespaceSelector = v1beta1.NamespaceNamed("shop")
		ss.Annotations = map[string]string{v1beta1.SidecarSetCanaryAnnotation: "true", v1beta1.SidecarSetBaseAnnotation: "base"}
	})
	doc, err := Normalize(ss)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"matchLabels": map[string]any{v1beta1.NamespaceNameLabel: "shop"}, "matchExpressions": []any{}}, doc["namespaceSelector"])
	assert.Equal(t, true, doc["canary"])
	assert.Equal(t, "base", doc["base"])

	// A canary annotation without a base is not a canary (compat §1.21).
	ss.Annotations = map[string]string{v1beta1.SidecarSetCanaryAnnotation: "true"}
	doc, err = Normalize(ss)
	require.NoError(t, err)
	assert.Equal(t, false, doc["canary"])
	assert.Equal(t, "", doc["base"])

	// Nor is one that names itself as its base, which validation refuses (decision D3).
	ss.Annotations = map[string]string{v1beta1.SidecarSetCanaryAnnotation: "true", v1beta1.SidecarSetBaseAnnotation: "a"}
	doc, err = Normalize(ss)
	require.NoError(t, err)
	assert.Equal(t, false, doc["canary"])
	assert.Equal(t, "", doc["base"])
}

// opaBinary is the pinned opa built by `make tools`; the Makefile passes its path.
func opaBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("SIDECAROPS_OPA")
	if p == "" {
		t.Fatal("SIDECAROPS_OPA is not set: run the tests through `make test` (it builds the pinned opa with `make tools`)")
	}
	return p
}

// TestStockOPAReadsBundle proves the written bundle is a plain OPA bundle: stock `opa eval -b`
// gives the same match decision as evaluating the in-memory bundle.
func TestStockOPAReadsBundle(t *testing.T) {
	opa := opaBinary(t)
	b, err := compileBundle(State{SidecarSets: []*v1beta1.SidecarSet{
		sidecarSet("logging", labels("app", "web")),
		sidecarSet("mesh", labels("mesh", "on")),
		sidecarSet("other-ns", labels("app", "web"), func(ss *v1beta1.SidecarSet) { ss.Spec.NamespaceSelector = v1beta1.NamespaceNamed("elsewhere") }),
	}})
	require.NoError(t, err)
	dir := t.TempDir()
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, b))
	bundlePath := filepath.Join(dir, "bundle.tar.gz")
	require.NoError(t, os.WriteFile(bundlePath, buf.Bytes(), 0o600))
	input := map[string]any{"namespace": "shop", "pod": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web", "mesh": "on"}}}}
	raw, _ := json.Marshal(input)
	inputPath := filepath.Join(dir, "input.json")
	require.NoError(t, os.WriteFile(inputPath, raw, 0o600))

	out, err := exec.Command(opa, "eval", "-f", "json", "-b", bundlePath, "-i", inputPath, "data.sidecarops.match.decision").CombinedOutput()
	require.NoError(t, err, string(out))
	var res struct {
		Result []struct {
			Expressions []struct{ Value any } `json:"expressions"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	require.Len(t, res.Result, 1)
	stock := res.Result[0].Expressions[0].Value

	rs, err := rego.New(rego.Query("data.sidecarops.match.decision"), rego.ParsedBundle("core", b), rego.Input(input)).Eval(context.Background())
	require.NoError(t, err)
	assert.Equal(t, rs[0].Expressions[0].Value, stock)
	assert.Equal(t, []any{"logging", "mesh"}, stock.(map[string]any)["matched"], "other-ns is scoped to another namespace")
}

func rsaKeys(t *testing.T) (priv, pub string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pubDER, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}))
}

func ecKeys(t *testing.T) (priv, pub string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	privDER, err := x509.MarshalECPrivateKey(k)
	require.NoError(t, err)
	pubDER, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: privDER})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}))
}

func writeBundle(t *testing.T, sign func(*testing.T, []byte) []byte) []byte {
	t.Helper()
	b, err := compileBundle(State{SidecarSets: []*v1beta1.SidecarSet{sidecarSet("a", labels("app", "web"))}})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, b))
	if sign != nil {
		return sign(t, buf.Bytes())
	}
	return buf.Bytes()
}

// tamper rewrites data.json inside a bundle tarball, leaving the signature as it was.
func tamper(t *testing.T, raw []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tw := tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		if strings.HasSuffix(h.Name, "data.json") {
			body = bytes.Replace(body, []byte(`"web"`), []byte(`"evil"`), 1)
			h.Size = int64(len(body))
		}
		require.NoError(t, tw.WriteHeader(h))
		_, err = tw.Write(body)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return out.Bytes()
}

func TestSignAndVerify(t *testing.T) {
	rsaPriv, rsaPub := rsaKeys(t)
	ecPriv, ecPub := ecKeys(t)
	_, otherPub := rsaKeys(t)

	signed := func(priv, alg, kid string) []byte {
		b, err := compileBundle(State{SidecarSets: []*v1beta1.SidecarSet{sidecarSet("a", labels("app", "web"))}})
		require.NoError(t, err)
		require.NoError(t, Sign(b, priv, alg, kid))
		var buf bytes.Buffer
		require.NoError(t, Write(&buf, b))
		return buf.Bytes()
	}
	verifier := func(pub, alg string) *Verification {
		v, err := NewVerification(map[string]string{DefaultKeyID: pub}, alg, "")
		require.NoError(t, err)
		return v
	}
	rsaSigned := signed(rsaPriv, "RS256", "")
	cases := []struct {
		name    string
		raw     []byte
		v       *Verification
		wantErr string
	}{
		{"RS256 signed, verified", rsaSigned, verifier(rsaPub, "RS256"), ""},
		{"ES256 signed, verified", signed(ecPriv, "ES256", ""), verifier(ecPub, "ES256"), ""},
		{"unsigned refused when keys are configured", writeBundle(t, nil), verifier(rsaPub, "RS256"), "bundle missing .signatures.json"},
		{"tampered refused", tamper(t, rsaSigned), verifier(rsaPub, "RS256"), "digest mismatch"},
		{"wrong key refused", rsaSigned, verifier(otherPub, "RS256"), "failed to verify"},
		{"unknown key id refused", signed(rsaPriv, "RS256", "team-a"), verifier(rsaPub, "RS256"), "team-a"},
		{"no verification configured reads unsigned", writeBundle(t, nil), nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ReadBytes("test.tar.gz", tc.raw, tc.v)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.NotEmpty(t, b.Manifest.Revision)
			assert.NotEmpty(t, b.Modules)
		})
	}
}

func TestReadDirectoryBundle(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".manifest"), []byte(`{"revision":"r1","roots":["whitelist"]}`), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "whitelist"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "whitelist", "data.json"), []byte(`{"rules":[{"allowedAnnotationKeyExprs":["x"]}]}`), 0o600))
	// Tests sit beside the policies, outside the roots; they are not served.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "whitelist_test.rego"), []byte("package whitelist_test\n\ntest_x if true\n"), 0o600))
	b, err := Read(dir, nil)
	require.NoError(t, err)
	assert.Empty(t, b.Modules)
	assert.Equal(t, "r1", b.Manifest.Revision)
	assert.Equal(t, map[string]any{"whitelist": map[string]any{"rules": []any{map[string]any{"allowedAnnotationKeyExprs": []any{"x"}}}}}, b.Data)

	_, pub := rsaKeys(t)
	v, err := NewVerification(map[string]string{DefaultKeyID: pub}, "RS256", "")
	require.NoError(t, err)
	_, err = Read(dir, v)
	require.ErrorContains(t, err, "bundle missing .signatures.json", "an unsigned directory bundle is refused too")

	_, err = Read(filepath.Join(dir, "missing"), nil)
	require.ErrorContains(t, err, "missing")
}

// The generated module must stay parseable by the stock parser for any label text.
func TestIndexModuleParses(t *testing.T) {
	mod := IndexModule(IndexPackage, map[string]string{"x": IndexRules(sidecarSet("x", labels("a/b.c", "\n\t\"'`$\u2028")))})
	_, err := ast.ParseModuleWithOpts("i.rego", mod, ast.ParserOptions{RegoVersion: ast.RegoV1})
	require.NoError(t, err, mod)
}

// A bundle whose file decompresses past MaxFileSize is refused while it is being read, not after
// the whole file is in memory: a 100 MiB data.json compresses to about 100 KB.
func TestReadRefusesOversizedFiles(t *testing.T) {
	var tgz bytes.Buffer
	gz := gzip.NewWriter(&tgz)
	tw := tar.NewWriter(gz)
	data := append(append([]byte(`{"x":"`), bytes.Repeat([]byte("a"), 100<<20)...), `"}`...)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "/data.json", Mode: 0o600, Size: int64(len(data))}))
	_, err := tw.Write(data)
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	require.Less(t, tgz.Len(), 1<<20, "the bomb is small")

	_, err = ReadBytes("bomb.tar.gz", tgz.Bytes(), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "size")
}

// collidableAndColliding are, in b, the SidecarSets data.sidecarops.state.collidable lists and
// those the match policy's _collide pairs with another.
func collidableAndColliding(t *testing.T, b *bundle.Bundle) (collidable, colliding []string) {
	t.Helper()
	rs, err := rego.New(
		rego.Query(`collidable := sort([name | some name, _ in data.sidecarops.state.collidable])
			colliding := sort({name |
				some a, _ in data.sidecarops.state.sidecarsets
				some b, _ in data.sidecarops.state.sidecarsets
				data.sidecarops.match._collide(a, b)
				some name in [a, b]
			})`),
		rego.ParsedBundle("core", b),
	).Eval(context.Background())
	require.NoError(t, err)
	require.Len(t, rs, 1)
	return strs(rs[0].Bindings["collidable"]), strs(rs[0].Bindings["colliding"])
}

// TestCollidableIsExact is a property test of data.sidecarops.state.collidable: over random fleets
// sharing container, init container and volume names (volumes with equal and with other
// definitions), it lists exactly the SidecarSets that the match policy's _collide pairs with
// another. Missing one would let a pod get two colliding SidecarSets; the policy looks no further.
func TestCollidableIsExact(t *testing.T) {
	rnd := mathrand.New(mathrand.NewPCG(13, 17))
	names := []string{"proxy", "agent", "log", "init"}
	listed, judged := 0, 0
	for round := range 30 {
		var sets []*v1beta1.SidecarSet
		for i := range 6 {
			sets = append(sets, sidecarSet(fmt.Sprintf("ss-%d", i), labels("app", "a"), func(ss *v1beta1.SidecarSet) {
				// Rare names so that most rounds have few collisions and some none.
				ss.Spec.Containers[0].Name = fmt.Sprintf("own-%d", i)
				if rnd.IntN(4) == 0 {
					ss.Spec.Containers = append(ss.Spec.Containers, v1beta1.SidecarContainer{Container: corev1.Container{Name: names[rnd.IntN(len(names))], Image: "busybox"}})
				}
				if rnd.IntN(4) == 0 {
					ss.Spec.InitContainers = []v1beta1.SidecarContainer{{Container: corev1.Container{Name: names[rnd.IntN(len(names))], Image: "busybox"}}}
				}
				if rnd.IntN(3) == 0 {
					ss.Spec.Volumes = []corev1.Volume{{Name: names[rnd.IntN(len(names))], VolumeSource: corev1.VolumeSource{
						EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMedium(fmt.Sprint(rnd.IntN(2)))}}}}
				}
			}))
		}
		b, err := compileBundle(State{SidecarSets: sets})
		require.NoError(t, err)
		got, want := collidableAndColliding(t, b)
		require.Equal(t, want, got, "round %d", round)
		listed += len(got)
		judged += len(sets)
	}
	// Both outcomes must occur for the agreement to mean anything.
	assert.Greater(t, listed, judged/10, "too few collidable: %d of %d", listed, judged)
	assert.Less(t, listed, judged/2, "too many collidable: %d of %d", listed, judged)
}
