package loader

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sidecarops/sidecarops/bundles"
)

// readyWith starts h and waits until a snapshot serves.
func readyWith(t *testing.T, h *harness) {
	t.Helper()
	h.start(t)
	h.st.SetClusterSynced()
	eventually(t, func() bool { return h.st.Ready() == nil }, "ready")
}

// denied waits until the snapshot's gates give want for a hostNetwork pod.
func denied(t *testing.T, h *harness, want string) {
	t.Helper()
	eventually(t, func() bool {
		d := decide(t, h.eng)
		return len(d.Denied) == 1 && d.Denied[0] == want
	}, "gate %q serving", want)
}

func TestFileSourceDirectory(t *testing.T) {
	h := newHarness(t, Options{})
	dir := filepath.Join(t.TempDir(), "gates")
	writeDir(t, dir, gateFiles("d1", "dir one"))
	src, err := NewFileSource(h.st, FileOptions{Name: "gates", Path: dir})
	require.NoError(t, err)
	assert.False(t, src.NeedLeaderElection())
	src.Poll()
	readyWith(t, h)
	denied(t, h, "dir one")

	// Polling unchanged content offers nothing.
	src.Poll()
	assert.Equal(t, 1.0, h.activations("gates", resultSuccess))

	writeDir(t, dir, gateFiles("d2", "dir two"))
	src.Poll()
	denied(t, h, "dir two")
	eventually(t, func() bool { return h.activations("gates", resultSuccess) == 2 }, "second activation counted")
}

func TestFileSourceTarball(t *testing.T) {
	h := newHarness(t, Options{})
	path := filepath.Join(t.TempDir(), "gates.tar.gz")
	require.NoError(t, os.WriteFile(path, tarGz(t, gateFiles("t1", "tar one")), 0o600))
	src, err := NewFileSource(h.st, FileOptions{Name: "gates", Path: path})
	require.NoError(t, err)
	src.Poll()
	readyWith(t, h)
	denied(t, h, "tar one")

	require.NoError(t, os.WriteFile(path, tarGz(t, gateFiles("t2", "tar two")), 0o600))
	src.Poll()
	denied(t, h, "tar two")
}

func TestFileSourceVerification(t *testing.T) {
	priv, _, otherPriv := testKeys(t)
	h := newHarness(t, Options{})
	persist := t.TempDir()
	dir := filepath.Join(t.TempDir(), "gates")
	writeDir(t, dir, sign(t, gateFiles("s1", "signed one"), priv, nil))
	src, err := NewFileSource(h.st, FileOptions{Name: "gates", Path: dir, Verification: testVerification(t, ""), PersistDir: persist})
	require.NoError(t, err)
	src.Poll()
	readyWith(t, h)
	denied(t, h, "signed one")

	refusals := 0.0
	refused := func(what string, files map[string]string, wantErr string) {
		t.Helper()
		writeDir(t, dir, files)
		src.Poll()
		refusals++
		eventually(t, func() bool { return h.activations("gates", resultFailure) == refusals }, "%s refused", what)
		var evs []string
		eventually(t, func() bool {
			evs = append(evs, h.drainEvents()...)
			return strings.Contains(strings.Join(evs, "\n"), wantErr)
		},
			"%s: Event naming %q", what, wantErr)
		denied(t, h, "signed one")
	}
	h.drainEvents()

	tampered := sign(t, gateFiles("s2", "signed two"), priv, nil)
	tampered["gates/gates.rego"] = strings.Replace(tampered["gates/gates.rego"], "signed two", "evil", 1)
	refused("tampered", tampered, "digest mismatch")
	refused("unsigned", gateFiles("s3", "unsigned"), "bundle missing .signatures.json")
	refused("signed with another key", sign(t, gateFiles("s4", "other key"), otherPriv, nil), "failed to verify")

	// The persisted copy is the last good bundle, not the refused ones.
	persisted, _, _, err := readPersisted(src.p, testVerification(t, ""), bundles.Limits{})
	require.NoError(t, err)
	assert.Equal(t, "s1", persisted.Manifest.Revision)

	writeDir(t, dir, sign(t, gateFiles("s5", "signed five"), priv, nil))
	src.Poll()
	denied(t, h, "signed five")
}

func TestFileSourceScope(t *testing.T) {
	priv, _, _ := testKeys(t)
	h := newHarness(t, Options{})
	path := filepath.Join(t.TempDir(), "gates.tar.gz")
	require.NoError(t, os.WriteFile(path, tarGz(t, sign(t, gateFiles("w", "wrong scope"), priv, map[string]any{"scope": "staging"})), 0o600))
	src, err := NewFileSource(h.st, FileOptions{Name: "gates", Path: path, Verification: testVerification(t, "production")})
	require.NoError(t, err)
	src.Poll()
	assert.Equal(t, 1.0, h.activations("gates", resultFailure))

	require.NoError(t, os.WriteFile(path, tarGz(t, sign(t, gateFiles("p", "production scope"), priv, map[string]any{"scope": "production"})), 0o600))
	src.Poll()
	readyWith(t, h)
	denied(t, h, "production scope")
}

// A restart with the bundle file gone (or refused) starts with the persisted last good bundle.
func TestFileSourcePersistedAtStart(t *testing.T) {
	priv, _, _ := testKeys(t)
	persist := t.TempDir()
	dir := filepath.Join(t.TempDir(), "gates")
	writeDir(t, dir, sign(t, gateFiles("p1", "persisted"), priv, nil))
	first := newHarness(t, Options{})
	src, err := NewFileSource(first.st, FileOptions{Name: "gates", Path: dir, Verification: testVerification(t, ""), PersistDir: persist})
	require.NoError(t, err)
	src.Poll()
	assert.FileExists(t, filepath.Join(persist, "gates", "bundle.tar.gz"))

	for name, prepare := range map[string]func(){
		"file gone":     func() { require.NoError(t, os.RemoveAll(dir)) },
		"file tampered": func() { writeDir(t, dir, gateFiles("x", "unsigned")) },
	} {
		t.Run(name, func(t *testing.T) {
			prepare()
			h := newHarness(t, Options{})
			src, err := NewFileSource(h.st, FileOptions{Name: "gates", Path: dir, Verification: testVerification(t, ""), PersistDir: persist})
			require.NoError(t, err)
			src.Poll()
			src.restore()
			readyWith(t, h)
			denied(t, h, "persisted")
		})
	}

	t.Run("persisted copy tampered", func(t *testing.T) {
		require.NoError(t, os.RemoveAll(dir))
		bad := filepath.Join(t.TempDir(), "persist")
		require.NoError(t, os.MkdirAll(filepath.Join(bad, "gates"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(bad, "gates", "bundle.tar.gz"), tarGz(t, gateFiles("x", "unsigned")), 0o600))
		h := newHarness(t, Options{})
		src, err := NewFileSource(h.st, FileOptions{Name: "gates", Path: dir, Verification: testVerification(t, ""), PersistDir: bad})
		require.NoError(t, err)
		src.Poll()
		src.restore()
		assert.Equal(t, 1.0, h.sourceErrors("gates"), "the missing file is a source error")
		assert.Equal(t, 1.0, h.activations("gates", resultFailure), "the unsigned persisted copy is refused")
		require.ErrorContains(t, h.st.Ready(), "waiting for bundle sources gates")
	})
}

func TestFileSourceMissingReportedOnce(t *testing.T) {
	h := newHarness(t, Options{})
	src, err := NewFileSource(h.st, FileOptions{Name: "gates", Path: filepath.Join(t.TempDir(), "nothing")})
	require.NoError(t, err)
	src.Poll()
	src.Poll()
	assert.Equal(t, 1.0, h.sourceErrors("gates"), "an unchanged problem is reported once, not every poll")
	_, err = NewFileSource(h.st, FileOptions{Name: "x"})
	require.ErrorContains(t, err, "no path")
}

// Start reads at once and then notices a change on disk by itself.
func TestFileSourceStartWatches(t *testing.T) {
	h := newHarness(t, Options{})
	path := filepath.Join(t.TempDir(), "gates.tar.gz")
	require.NoError(t, os.WriteFile(path, tarGz(t, gateFiles("w1", "watched one")), 0o600))
	src, err := NewFileSource(h.st, FileOptions{Name: "gates", Path: path, Interval: 10 * time.Millisecond})
	require.NoError(t, err)
	runUntilCleanup(t, src.Start)
	readyWith(t, h)
	denied(t, h, "watched one")
	require.NoError(t, os.WriteFile(path, tarGz(t, gateFiles("w2", "watched two")), 0o600))
	denied(t, h, "watched two")
}

// Key files are named like sidecarctl's --verification-key: id = file name without extension, and a
// single key also answers to "default".
func TestLoadVerificationKeys(t *testing.T) {
	priv, pub, _ := testKeys(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "team-a.pem")
	require.NoError(t, os.WriteFile(keyFile, []byte(pub), 0o600))

	// The JWT header's kid names the key a bundle is verified with.
	signedAs := func(kid string) []byte { return tarGz(t, signWithKeyID(t, gateFiles("k", "keyed"), priv, kid)) }
	one, err := bundles.LoadVerificationKeys([]string{keyFile}, "", "")
	require.NoError(t, err)
	require.NotNil(t, one.OPAConfig(), "the OPA form the downloader needs")
	for _, kid := range []string{"default", "team-a"} {
		_, err := bundlesReadBytes(signedAs(kid), one)
		require.NoError(t, err, kid)
	}

	other := filepath.Join(dir, "team-b.pem")
	require.NoError(t, os.WriteFile(other, []byte(pub), 0o600))
	two, err := bundles.LoadVerificationKeys([]string{keyFile, other}, "RS256", "")
	require.NoError(t, err)
	_, err = bundlesReadBytes(signedAs("team-b"), two)
	require.NoError(t, err)
	_, err = bundlesReadBytes(signedAs("default"), two)
	require.ErrorContains(t, err, "default", "with several keys there is no default")

	_, err = bundles.LoadVerificationKeys([]string{filepath.Join(dir, "missing.pem")}, "", "")
	require.ErrorContains(t, err, "missing.pem")
	_, err = bundles.LoadVerificationKeys(nil, "", "")
	require.ErrorContains(t, err, "no public keys")
}
