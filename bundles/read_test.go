package bundles

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Gzip bombs: files of zeros, which deflate shrinks about 1,000 times. bombFiles files of
// bombFileSize each are just under MaxFileSize, so only a bound on the whole archive refuses them;
// together they decompress to 1 GiB from about 1 MiB.
const (
	bombFiles    = 32
	bombFileSize = MaxFileSize - 1024
)

// zeroReader is an endless source of zeros, to write a bomb without holding it.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// bombArchive writes a gzipped tarball of head's files (in order), then files files of size
// zeros each named bomb/fNN.rego.
func bombArchive(tb testing.TB, head []tarEntry, files int, size int64) []byte {
	tb.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tw := tar.NewWriter(zw)
	for _, e := range head {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}); err != nil {
			tb.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range files {
		if err := tw.WriteHeader(&tar.Header{Name: bombName(i), Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
			tb.Fatal(err)
		}
		if _, err := io.CopyN(tw, zeroReader{}, size); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return out.Bytes()
}

type tarEntry struct{ name, body string }

func bombName(i int) string { return fmt.Sprintf("bomb/f%02d.rego", i) }

// bombSignature is a .signatures.json signed with priv covering files bomb files of size zeros:
// a signature that verifies, as an administrator's key would give a bomb built by mistake or by
// whoever holds the key.
func bombSignature(tb testing.TB, priv string, files int, size int64) tarEntry {
	tb.Helper()
	hasher, err := bundle.NewSignatureHasher(bundle.SHA256)
	if err != nil {
		tb.Fatal(err)
	}
	sum, err := hasher.HashFile(make([]byte, size))
	if err != nil {
		tb.Fatal(err)
	}
	infos := make([]bundle.FileInfo, files)
	for i := range infos {
		infos[i] = bundle.NewFile(bombName(i), hex.EncodeToString(sum), bundle.SHA256.String())
	}
	token, err := bundle.GenerateSignedToken(infos, bundle.NewSigningConfig(priv, "RS256", ""), DefaultKeyID)
	if err != nil {
		tb.Fatal(err)
	}
	return tarEntry{".signatures.json", `{"signatures":["` + token + `"]}`}
}

var bombs = sync.OnceValues(func() (unsigned, signed []byte) {
	t := &testing.T{}
	priv, pub := rsaKeys(t)
	bombKey = pub
	return bombArchive(t, nil, bombFiles, bombFileSize),
		bombArchive(t, []tarEntry{bombSignature(t, priv, bombFiles, bombFileSize)}, bombFiles, bombFileSize)
})

// bombKey verifies the signed bomb; set by bombs.
var bombKey string

// BenchmarkReadBytesBomb reads a gzip bomb of 1 GiB (1 MiB compressed); B/op is what reading,
// and refusing, it allocates.
func BenchmarkReadBytesBomb(b *testing.B) {
	unsigned, signed := bombs()
	v, err := NewVerification(map[string]string{DefaultKeyID: bombKey}, "RS256", "")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		raw  []byte
		v    *Verification
	}{
		{"unsigned/verification", unsigned, v},
		{"unsigned/no-verification", unsigned, nil},
		{"signed/verification", signed, v},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ReadBytes("bomb.tar.gz", c.raw, c.v); err == nil {
					b.Fatal("the bomb was read")
				}
			}
			b.ReportMetric(float64(len(c.raw))/(1<<10), "gzip-KiB")
		})
	}
}

// Every limit refuses the bundle while it is read, naming the bundle, the file inside it and the
// limit; tar headers count towards the total, so a bundle of many empty files is refused too.
func TestReadBytesLimits(t *testing.T) {
	small := Limits{ArchiveBytes: 64 << 10, FileBytes: 16 << 10, TotalBytes: 48 << 10}
	empties := make([]tarEntry, 200) // 200 headers of 512 bytes
	for i := range empties {
		empties[i] = tarEntry{fmt.Sprintf("e/%03d.json", i), ""}
	}
	random := make([]byte, 80<<10)
	_, _ = rand.Read(random)
	cases := []struct {
		name    string
		raw     []byte
		wantErr string
	}{
		{"archive", bombArchive(t, []tarEntry{{"x.rego", string(random)}}, 0, 0), "the archive is over the size limit of 65536 bytes compressed"},
		{"one file", bombArchive(t, nil, 1, 16<<10+1), `file "bomb/f00.rego" is over the size limit of 16384 bytes per file (decompressed)`},
		{"files together", bombArchive(t, nil, 4, 15<<10), `over the size limit of 49152 bytes in total (decompressed), at file "bomb/f03.rego"`},
		{"headers", bombArchive(t, empties, 0, 0), "over the size limit of 49152 bytes in total (decompressed)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := small.ReadBytes("https://bundles.example.com/gates.tar.gz", c.raw, nil)
			require.ErrorIs(t, err, ErrTooLarge)
			assert.ErrorContains(t, err, "https://bundles.example.com/gates.tar.gz: bundle refused: too large: ")
			assert.ErrorContains(t, err, c.wantErr)
		})
	}
	_, err := small.ReadBytes("ok", writeBundle(t, nil), nil)
	require.NoError(t, err, "a bundle within the limits is read")
}

// The gzip bombs of issue #11 (here 8 files of zeros just under the per-file limit) are refused at
// the total limit whether unsigned or signed with the administrator's key; BenchmarkReadBytesBomb
// measures what that costs.
func TestReadBytesRefusesBombs(t *testing.T) {
	priv, pub := rsaKeys(t)
	v, err := NewVerification(map[string]string{DefaultKeyID: pub}, "RS256", "")
	require.NoError(t, err)
	l := Limits{FileBytes: 1 << 20, TotalBytes: 4 << 20}
	size := int64(1<<20 - 1024)
	unsigned := bombArchive(t, nil, 8, size)
	signed := bombArchive(t, []tarEntry{bombSignature(t, priv, 8, size)}, 8, size)
	for _, c := range []struct {
		name string
		raw  []byte
		v    *Verification
	}{
		{"unsigned, verification", unsigned, v},
		{"unsigned, no verification", unsigned, nil},
		{"signed, verification", signed, v},
	} {
		_, err := l.ReadBytes("bomb.tar.gz", c.raw, c.v)
		require.ErrorIs(t, err, ErrTooLarge, c.name)
		assert.ErrorContains(t, err, `over the size limit of 4194304 bytes in total (decompressed), at file "bomb/f0`, c.name)
	}
}

// A bad signature refuses the bundle where .signatures.json is met, before anything after it is
// decompressed: here what follows is a cut-off gzip stream, which OPA's loader, reading every file
// first, reported instead ("unexpected EOF"). An unsigned bundle is refused for it, whatever else
// it holds, after a pass that keeps nothing.
func TestReadBytesChecksSignatureFirst(t *testing.T) {
	_, pub := rsaKeys(t)
	otherPriv, _ := rsaKeys(t)
	v, err := NewVerification(map[string]string{DefaultKeyID: pub}, "RS256", "")
	require.NoError(t, err)
	whole := bombArchive(t, []tarEntry{bombSignature(t, otherPriv, 1, 1<<20)}, 1, 1<<20)
	cut := whole[:len(whole)-200]
	_, err = ReadBytes("cut.tar.gz", cut, nil)
	require.ErrorContains(t, err, "unexpected EOF", "the archive is cut within the file after the signature")

	_, err = ReadBytes("cut.tar.gz", cut, v)
	require.ErrorContains(t, err, "cut.tar.gz: bundle refused: .signatures.json: failed to verify")

	_, err = ReadBytes("unsigned.tar.gz", writeBundle(t, nil), v)
	require.ErrorContains(t, err, "unsigned.tar.gz: bundle refused: bundle missing .signatures.json file")
}

// BenchmarkReadBytes reads an ordinary signed bundle (one SidecarSet compiled): the price of the
// first pass that keeps nothing.
func BenchmarkReadBytes(b *testing.B) {
	priv, pub := rsaKeys(&testing.T{})
	v, err := NewVerification(map[string]string{DefaultKeyID: pub}, "RS256", "")
	if err != nil {
		b.Fatal(err)
	}
	raw := writeBundle(&testing.T{}, func(t *testing.T, raw []byte) []byte {
		bu, err := ReadBytes("unsigned", raw, nil)
		require.NoError(t, err)
		require.NoError(t, Sign(bu, priv, "RS256", ""))
		var buf bytes.Buffer
		require.NoError(t, Write(&buf, bu))
		return buf.Bytes()
	})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadBytes("bundle.tar.gz", raw, v); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReadBytesRefusesBundlesWithoutRoots: without .manifest, or without "roots" in it, a bundle owns
// all of data; it is refused where it is read, saying what to write, rather than by the engine's root
// overlap, which named neither.
func TestReadBytesRefusesBundlesWithoutRoots(t *testing.T) {
	gate := tarEntry{"gates.rego", "package gates\n\ndeny_injection contains \"no\" if input.pod.spec.hostNetwork\n"}
	for name, head := range map[string][]tarEntry{
		"no .manifest":         {gate},
		"no roots in it":       {{".manifest", `{"revision": "r1"}`}, gate},
		"the root of all data": {{".manifest", `{"roots": [""]}`}, gate},
	} {
		_, err := ReadBytes("gates.tar.gz", bombArchive(t, head, 0, 0), nil)
		require.Error(t, err, name)
		assert.Equal(t, `gates.tar.gz: bundle refused: no .manifest naming its roots, so it would own all of data, the compiled policies' root "sidecarops" included: `+
			`write {"roots": ["gates"]} (a gate) or {"roots": ["whitelist"]} (a whitelist) to a .manifest at the top of the bundle`, err.Error(), name)
	}
	b, err := ReadBytes("gates.tar.gz", bombArchive(t, []tarEntry{{".manifest", `{"roots": ["gates"]}`}, gate}, 0, 0), nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"gates"}, *b.Manifest.Roots)
}
