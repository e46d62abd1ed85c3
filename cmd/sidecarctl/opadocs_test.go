package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Where the administrators' policies are shown with stock opa commands.
var opaDocs = []string{"README.md", "docs/cli.md", "examples/policies/README.md", "examples/whitelist-bundle/README.md"}

// TestDocumentedOPACommandsRunVerbatim runs every `opa build` and `opa test` command of opaDocs as
// written, in order, with the pinned stock opa, in a copy of the examples and policies; and `opa test
// DIR` alone for every example bundle with tests (issue 31 item 7). Keys the commands name are made
// for them: one pair, the private key under every --signing-key name, the public under every
// --verification-key name.
func TestDocumentedOPACommandsRunVerbatim(t *testing.T) {
	opa := os.Getenv("SIDECAROPS_OPA")
	if opa == "" {
		t.Fatal("SIDECAROPS_OPA is not set: run the tests through `make test` (it builds the pinned opa with `make tools`)")
	}
	work := t.TempDir()
	for _, dir := range []string{"examples", "policies"} {
		require.NoError(t, os.CopyFS(filepath.Join(work, dir), os.DirFS(filepath.Join("../..", dir))))
	}
	var commands []string
	for _, doc := range opaDocs {
		commands = append(commands, opaCommands(string(mustRead(t, doc)))...)
	}
	bundleDirs, err := filepath.Glob("../../examples/*/.manifest")
	require.NoError(t, err)
	for _, m := range bundleDirs {
		dir := filepath.Dir(m)
		if tests, _ := filepath.Glob(filepath.Join(dir, "*_test.rego")); len(tests) > 0 {
			commands = append(commands, "opa test "+strings.TrimPrefix(dir, "../../"))
		}
	}
	require.NotEmpty(t, commands)

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	require.NoError(t, err)
	keyFiles := map[string][]byte{
		"signing-key":      pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"verification-key": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
	}
	keyFlag := regexp.MustCompile(`--(signing-key|verification-key) (\S+)`)
	for _, c := range commands {
		for _, m := range keyFlag.FindAllStringSubmatch(c, -1) {
			if !strings.HasSuffix(m[2], ".tar.gz") {
				require.NoError(t, os.WriteFile(filepath.Join(work, m[2]), keyFiles[m[1]], 0o600))
			}
		}
	}
	path := filepath.Dir(opa) + string(os.PathListSeparator) + os.Getenv("PATH")
	for _, c := range commands {
		cmd := exec.Command("bash", "-ec", c)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "PATH="+path)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s\n%s", c, out)
		t.Logf("%s: ok", c)
	}
}

// opaCommands are the `opa build` and `opa test` lines of a document's code blocks, a console
// prompt taken off and continuation lines joined.
func opaCommands(doc string) []string {
	var out []string
	lines := strings.Split(strings.ReplaceAll(doc, "\\\n", ""), "\n")
	for _, l := range lines {
		l = strings.TrimPrefix(strings.TrimSpace(l), "$ ")
		if strings.HasPrefix(l, "opa build ") || strings.HasPrefix(l, "opa test ") {
			out = append(out, l)
		}
	}
	return out
}
