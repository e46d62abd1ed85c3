package manifest

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
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
			assert.Equal(t, []string{fmt.Sprintf("bomb.yaml:6: document 2: %d bytes as JSON, its YAML aliases and escapes expanded, over the limit of %d bytes per document",
				size, DefaultMaxDocumentBytes)}, errorLines(t, got.Errors.err()))
			allocated := after.TotalAlloc - before.TotalAlloc
			assert.Less(t, allocated, uint64(64<<20), "allocated %d bytes decoding %d bytes", allocated, len(in))
		})
	}
}

// The bound is exact where it can be: a document of exactly the limit is read, one byte more is
// refused, as written and as JSON (aliases and escapes expanded); every JSON document as written.
// The name of the limit, when the caller gives one, is in the message.
func TestDocumentSizeLimit(t *testing.T) {
	// Longer as written than as JSON.
	commented := "# " + strings.Repeat("c", 200) + "\n" + pods("p")
	aliased := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: &a " + strings.Repeat("x", 100) + ", b: *a, c: *a, d: *a}\n"
	escaped := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: e}\ndata: {a: \"" + strings.Repeat(`\x01`, 100) + "\"}\n"
	asJSON := `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}}`
	overAsJSON := func(doc string) string {
		return fmt.Sprintf("f.yaml:1: document 1: %d bytes as JSON, its YAML aliases and escapes expanded, over the limit of %d bytes per document (--max)", measured(t, doc), measured(t, doc)-1)
	}
	tests := []struct {
		name  string
		doc   string
		limit int64
		err   string
	}{
		{name: "written: at the limit", doc: commented, limit: int64(len(commented))},
		{name: "written: one byte over", doc: commented, limit: int64(len(commented) - 1),
			err: fmt.Sprintf("f.yaml:2: document 1: %d bytes as written, over the limit of %d bytes per document (--max)", len(commented), len(commented)-1)},
		{name: "as JSON: at the limit", doc: pods("p"), limit: measured(t, pods("p"))},
		{name: "as JSON: one byte over", doc: pods("p"), limit: measured(t, pods("p")) - 1, err: overAsJSON(pods("p"))},
		{name: "aliases expanded: at the limit", doc: aliased, limit: measured(t, aliased)},
		{name: "aliases expanded: one byte over", doc: aliased, limit: measured(t, aliased) - 1, err: overAsJSON(aliased)},
		{name: "escapes expanded: at the limit", doc: escaped, limit: measured(t, escaped)},
		{name: "escapes expanded: one byte over", doc: escaped, limit: measured(t, escaped) - 1, err: overAsJSON(escaped)},
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
			got := Reader{MaxDocumentBytes: tt.limit, DocumentLimitName: "--max"}.DecodeInput("f.yaml", []byte(in))
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

// What the bound measures is the JSON the conversion produces, escapes included: never less, and
// more only by two bytes a plain scalar (it may convert to a number, boolean or null), a separator
// per collection and what a merge key repeats. A YAML escape counts as the JSON escape it becomes,
// not as the byte it decodes to (issue 35 item 4).
func TestMeasuredSizeIsTheJSONSize(t *testing.T) {
	for _, doc := range []string{
		"a: b",
		"a: &x {b: [1, 2, {c: d}], e: null}\nf: *x\ng: [*x, *x]",
		"- &s text\n- [*s, *s, *s]\n- {k: *s}",
		"base: &b {x: 1}\nmerged: {<<: *b, y: 2}",
		"[]",
		"{}",
		"a: []\nb: {}",
		"a: [n, y, ~, '', 1e5, -1e-5, .5, 0x10]",
		`a: &e "\x01\0\a\e\L\P"` + "\nb: [*e, *e]",
		`a: "<>&\t\u00e9\"\\"`,
		"a: <>&\tb",
		`a: &b !!binary /w==` + "\nb: *b",
		"\ufeffa: \u2028",
	} {
		j, err := yaml.YAMLToJSON([]byte(doc))
		require.NoError(t, err)
		size := measured(t, doc)
		assert.GreaterOrEqual(t, size, int64(len(j)), doc)
		assert.LessOrEqual(t, size, 2*int64(len(j))+int64(len("{}")), doc)
	}
}

// A long string is measured piece by piece; a character cut between two pieces, or an invalid one,
// counts as the encoder writes it whole.
func TestJSONStringSize(t *testing.T) {
	for _, s := range []string{
		"",
		"plain",
		strings.Repeat("\x01", 10000),
		strings.Repeat("é", 5000) + strings.Repeat("x", 4095) + "\u2028" + strings.Repeat("€", 3000),
		strings.Repeat("x", 4095) + "\xff\xfe" + strings.Repeat("\x80", 4100) + "<",
	} {
		j, err := json.Marshal(s)
		require.NoError(t, err)
		assert.Equal(t, int64(len(j)), jsonStringSize(s), "%.40q", s)
	}
}

// Issue 35 item 4: --max-document-bytes held per document only, and a YAML escape counted as the
// byte it decodes to, though the conversion writes it back as the six of \u0001, once per alias.
// The probe's two inputs, scaled down: twenty documents each under the limit (an aliased scalar),
// and two documents of an aliased scalar of escapes. The whole input is bounded too, every
// document counted as for the bound per document; the document that goes over is refused before it
// is expanded, and nothing after it is read.
func TestInputSizeLimit(t *testing.T) {
	plain := "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k0: &a " + strings.Repeat("x", 1000) + ", k1: *a, k2: *a, k3: *a}\n"
	escaped := strings.Replace(plain, strings.Repeat("x", 1000), `"`+strings.Repeat(`\x01`, 1000)+`"`, 1)
	jsonDoc := `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}, "data": {"k": "` + strings.Repeat(`\u0001`, 100) + `"}}` + "\n"
	// exact is what the JSON of a document really is, which it costs once read.
	exact := func(doc string) int64 {
		j, err := yaml.YAMLToJSON([]byte(doc))
		require.NoError(t, err)
		return int64(len(j))
	}
	plainSize, escapedSize := exact(plain), exact(escaped)
	require.Greater(t, escapedSize, 4*int64(len(escaped)), "the escapes cost more than they are written with")
	overInput := func(source string, line, doc int, size int64, what string, used, limit int64) string {
		return fmt.Sprintf("%s:%d: document %d: %d bytes %s, bringing the input to %d bytes, over the limit of %d bytes for the whole input (--in); the rest of the input is not read",
			source, line, doc, size, what, used+size, limit)
	}
	configMaps := func(source string, n int) []string {
		var out []string
		for i := 1; i <= n; i++ {
			out = append(out, fmt.Sprintf("%s: document %d (ConfigMap/c)", source, i))
		}
		return out
	}
	const expanded = "as JSON, its YAML aliases and escapes expanded"
	tests := []struct {
		name          string
		files         []string // a.yaml, b.yaml, ... read in order
		stdin         string   // read after them, when not empty
		decode        string   // instead of files and stdin: a.json's content, already in memory
		limit, perDoc int64
		objects       []string
		errs          []string
	}{
		{
			name:    "twenty documents each under the limit: those that fit are read, the next is refused and nothing after it is read",
			files:   []string{strings.Repeat(plain, 20)},
			limit:   10*plainSize + measured(t, plain) - 1,
			objects: configMaps("a.yaml", 10),
			errs:    []string{overInput("a.yaml", 52, 11, measured(t, plain), expanded, 10*plainSize, 10*plainSize+measured(t, plain)-1)},
		},
		{
			name:    "at the limit, all are read",
			files:   []string{strings.Repeat(plain, 20)},
			limit:   19*plainSize + measured(t, plain),
			objects: configMaps("a.yaml", 20),
		},
		{
			name:   "two documents of escapes, each over the limit per document as JSON (not as written)",
			files:  []string{strings.Repeat(escaped, 2)},
			perDoc: escapedSize - 1,
			errs: []string{
				fmt.Sprintf("a.yaml:2: document 1: %d bytes %s, over the limit of %d bytes per document (--doc)", measured(t, escaped), expanded, escapedSize-1),
				fmt.Sprintf("a.yaml:7: document 2: %d bytes %s, over the limit of %d bytes per document (--doc)", measured(t, escaped), expanded, escapedSize-1),
			},
		},
		{
			name:    "two documents of escapes, over the limit together",
			files:   []string{strings.Repeat(escaped, 2)},
			limit:   2*escapedSize - 1,
			objects: configMaps("a.yaml", 1),
			errs:    []string{overInput("a.yaml", 7, 2, measured(t, escaped), expanded, escapedSize, 2*escapedSize-1)},
		},
		{
			name:    "JSON documents count as written",
			decode:  strings.Repeat(jsonDoc, 3),
			limit:   3*int64(len(jsonDoc)) - 4,
			objects: []string{"a.json: document 1 (ConfigMap/j)", "a.json: document 2 (ConfigMap/j)"},
			errs:    []string{overInput("a.json", 3, 3, int64(len(jsonDoc)-1), "as written", 2*int64(len(jsonDoc)-1), 3*int64(len(jsonDoc))-4)},
		},
		{
			name:    "a file larger than what is left is not read, nor anything after it",
			files:   []string{plain, strings.Repeat(plain, 20), plain},
			stdin:   plain,
			limit:   3 * plainSize,
			objects: configMaps("a.yaml", 1),
			errs: []string{fmt.Sprintf("b.yaml: %d bytes as written, bringing the input to %d bytes, over the limit of %d bytes for the whole input (--in); the rest of the input is not read",
				20*len(plain), plainSize+20*int64(len(plain)), 3*plainSize)},
		},
		{
			name:    "the largest limit leaves everything in",
			stdin:   plain,
			limit:   math.MaxInt64,
			objects: configMaps("<stdin>", 1),
		},
		{
			name:  "standard input larger than the limit is read no further",
			stdin: strings.Repeat(plain, 1000),
			limit: plainSize,
			errs:  []string{fmt.Sprintf("<stdin>: more than %d bytes as written, bringing the input over the limit of %d bytes for the whole input (--in); the rest of the input is not read", plainSize, plainSize)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			var paths []string
			for i, content := range tt.files {
				paths = append(paths, string(rune('a'+i))+".yaml")
				require.NoError(t, os.WriteFile(paths[i], []byte(content), 0o600))
			}
			if tt.stdin != "" {
				paths = append(paths, Stdin)
			}
			rd := Reader{MaxDocumentBytes: tt.perDoc, DocumentLimitName: "--doc", MaxInputBytes: tt.limit, InputLimitName: "--in"}
			var got Input
			if tt.decode != "" {
				got = rd.DecodeInput("a.json", []byte(tt.decode))
			} else {
				got = rd.ReadInput(strings.NewReader(tt.stdin), paths...)
			}
			if len(tt.objects) == 0 {
				assert.Empty(t, got.Objects)
			} else {
				assert.Equal(t, tt.objects, names(got.Objects))
			}
			assert.Equal(t, tt.errs, errorLines(t, got.Errors.err()))
		})
	}
}
