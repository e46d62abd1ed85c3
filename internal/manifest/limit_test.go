package manifest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// scalarBomb is one scalar of size bytes aliased n times: small to write, n times size as JSON.
func scalarBomb(size, n int) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\nanchor: &a ")
	b.WriteString(strings.Repeat("x", size))
	b.WriteString("\naliases:\n")
	for range n {
		b.WriteString("- *a\n")
	}
	return b.String()
}

// laughs is the nested alias bomb ("billion laughs"): each of levels lists the one before it
// width times, so the last expands to width^levels scalars.
func laughs(width, levels int) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: laughs}\nl0: &l0 lol\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", i-1), width), ","))
	}
	return b.String()
}

// measured is what checkYAMLSize measures of doc once its aliases are expanded.
func measured(t *testing.T, doc string) int64 {
	t.Helper()
	var n yaml3.Node
	require.NoError(t, yaml3.Unmarshal([]byte(doc), &n))
	size, selfAlias := jsonSize(&n, map[*yaml3.Node]int64{})
	require.Nil(t, selfAlias)
	return size
}

// Issue 28 item 7: an alias bomb is refused before it is expanded, with an error naming file,
// document and limit, and the documents around it are read. Before the bound the scalar bomb
// alone took minutes and gigabytes (and was then refused for what it is, not for its size), so
// this asserts on the memory allocated, not on time.
func TestAliasBombsAreRefusedBeforeExpansion(t *testing.T) {
	tests := []struct {
		name, doc string
		atLeast   int64 // the bytes its scalars alone expand to
	}{
		{name: "a 1 MiB scalar aliased 1000 times", doc: scalarBomb(1<<20, 1000), atLeast: 1000 << 20},
		{name: "billion laughs", doc: laughs(10, 9), atLeast: 1e9 * int64(len("lol"))},
		{name: "a wide one, past go-yaml's own alias ratio check", doc: laughs(100, 6), atLeast: 1e12 * int64(len("lol"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := pods("a") + "---\n" + tt.doc + "---\n" + pods("b")
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			got := DecodeInput("bomb.yaml", []byte(in))
			runtime.ReadMemStats(&after)

			assert.Equal(t, []string{"bomb.yaml: document 1 (Pod/a)", "bomb.yaml: document 3 (Pod/b)"}, names(got.Objects))
			size := measured(t, tt.doc)
			assert.GreaterOrEqual(t, size, tt.atLeast)
			assert.Equal(t, []string{fmt.Sprintf("bomb.yaml:6: document 2: %d bytes once its YAML aliases are expanded, over the limit of %d bytes per document",
				size, DefaultMaxDocumentBytes)}, errorLines(t, got.Errors.err()))
			allocated := after.TotalAlloc - before.TotalAlloc
			assert.Less(t, allocated, uint64(64<<20), "allocated %d bytes decoding %d bytes", allocated, len(in))
		})
	}
}

// The bound is exact where it can be: a document of exactly the limit is read, one byte more is
// refused, as written and once aliases are expanded; every JSON document as written. The name of
// the limit, when the caller gives one, is in the message.
func TestDocumentSizeLimit(t *testing.T) {
	aliased := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: &a " + strings.Repeat("x", 100) + ", b: *a, c: *a, d: *a}\n"
	asJSON := `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}}`
	tests := []struct {
		name  string
		doc   string
		limit int64
		err   string
	}{
		{name: "written: at the limit", doc: pods("p"), limit: int64(len(pods("p")))},
		{name: "written: one byte over", doc: pods("p"), limit: int64(len(pods("p")) - 1),
			err: fmt.Sprintf("f.yaml:1: document 1: %d bytes as written, over the limit of %d bytes per document (--max)", len(pods("p")), len(pods("p"))-1)},
		{name: "aliases expanded: at the limit", doc: aliased, limit: measured(t, aliased)},
		{name: "aliases expanded: one byte over", doc: aliased, limit: measured(t, aliased) - 1,
			err: fmt.Sprintf("f.yaml:1: document 1: %d bytes once its YAML aliases are expanded, over the limit of %d bytes per document (--max)", measured(t, aliased), measured(t, aliased)-1)},
		{name: "JSON: at the limit", doc: asJSON, limit: int64(len(asJSON))},
		{name: "JSON: one byte over", doc: asJSON, limit: int64(len(asJSON)) - 1,
			err: fmt.Sprintf("f.yaml:1: document 1: %d bytes as written, over the limit of %d bytes per document (--max)", len(asJSON), len(asJSON)-1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The document under test comes first, followed by a small one of the same stream.
			in := tt.doc + "\n{}"
			if !strings.HasPrefix(tt.doc, "{") {
				in = tt.doc + "---\na: 2\n"
			}
			got := Reader{MaxDocumentBytes: tt.limit, LimitName: "--max"}.DecodeInput("f.yaml", []byte(in))
			var errs []string
			for _, e := range got.Errors {
				if e.Doc == 1 {
					errs = append(errs, e.Error())
				}
			}
			if tt.err == "" {
				assert.Empty(t, errs)
				require.Len(t, got.Objects, 1)
				assert.Equal(t, 1, got.Objects[0].Doc)
				return
			}
			assert.Equal(t, []string{tt.err}, errs)
			assert.Empty(t, got.Objects)
			assert.NotEmpty(t, got.Errors.err(), "the documents around it are read (and refused for what they are)")
		})
	}
}

// What the bound measures is the JSON the conversion produces, escapes aside: never less, and more
// only by the quotes of numbers, booleans and nulls and the separators of empty collections.
func TestMeasuredSizeIsTheJSONSize(t *testing.T) {
	for _, doc := range []string{
		"a: b",
		"a: &x {b: [1, 2, {c: d}], e: null}\nf: *x\ng: [*x, *x]",
		"- &s text\n- [*s, *s, *s]\n- {k: *s}",
		"base: &b {x: 1}\nmerged: {<<: *b, y: 2}",
		"[]",
		"{}",
		"a: []\nb: {}",
	} {
		j, err := yaml.YAMLToJSON([]byte(doc))
		require.NoError(t, err)
		size := measured(t, doc)
		assert.GreaterOrEqual(t, size, int64(len(j)), doc)
		assert.LessOrEqual(t, size, int64(len(j))*2, doc)
	}
}
