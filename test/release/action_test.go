package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

const actionFile = "../../action.yml"

// action is action.yml as GitHub reads a composite action's metadata; the decoder refuses any other
// key, so that a misspelt one (require: for required:) fails here rather than being ignored by the runner.
type action struct {
	Name        string
	Description string
	Author      string
	Branding    struct{ Icon, Color string }
	Inputs      map[string]struct {
		Description string
		Required    bool
		Default     string
	}
	Outputs map[string]struct{ Description, Value string }
	Runs    struct {
		Using string
		Steps []step
	}
}

type step struct {
	ID    string
	Name  string
	Shell string
	Env   map[string]string
	Run   string
}

func readAction(t *testing.T) action {
	t.Helper()
	body, err := os.ReadFile(actionFile)
	require.NoError(t, err)
	var a action
	dec := yaml.NewDecoder(bytes.NewReader(body))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&a))
	return a
}

// expression is one ${{ }} of the action: context paths joined by ||, the only form it uses, so
// that the test evaluates it as GitHub does (the first non-empty value) and refuses any other.
var expression = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

func evaluate(t *testing.T, value string, contexts map[string]string) string {
	t.Helper()
	return expression.ReplaceAllStringFunc(value, func(m string) string {
		for _, path := range strings.Split(expression.FindStringSubmatch(m)[1], "||") {
			path = strings.TrimSpace(path)
			v, ok := contexts[path]
			require.True(t, ok, "%s: %s is not a context the test knows", m, path)
			if v != "" {
				return v
			}
		}
		return ""
	})
}

// The action declares the inputs the documentation names, every one of them reaches a step, and its
// steps are bash, as the runner needs a shell named for each step of a composite action.
func TestActionInputsAreUsed(t *testing.T) {
	a := readAction(t)
	assert.Equal(t, "composite", a.Runs.Using)
	names := make([]string, 0, len(a.Inputs))
	for n := range a.Inputs {
		names = append(names, n)
	}
	assert.ElementsMatch(t, []string{"version", "files", "strict", "bundle", "args"}, names)
	assert.True(t, a.Inputs["files"].Required, "nothing to check without files")
	var used strings.Builder
	for _, s := range a.Runs.Steps {
		assert.Equal(t, "bash", s.Shell, "step %q", s.Name)
		for _, v := range s.Env {
			used.WriteString(v + "\n")
		}
		assert.NotContains(t, s.Run, "${{", "step %q: inputs reach run: through env, never spliced into the script", s.Name)
	}
	for _, n := range names {
		assert.Contains(t, used.String(), "inputs."+n, "input %s is used by no step", n)
	}
	assert.Equal(t, "${{ steps.install.outputs.path }}", a.Outputs["path"].Value)
}

const version = "v0.1.0"

// platform is the release file's platform for the machine the test runs on, and the runner's names
// for it.
func platform(t *testing.T) (file, runnerOS, runnerArch string) {
	t.Helper()
	oses := map[string]string{"linux": "Linux", "darwin": "macOS"}
	arches := map[string]string{"amd64": "X64", "arm64": "ARM64"}
	if oses[runtime.GOOS] == "" || arches[runtime.GOARCH] == "" {
		t.Skipf("no sidecarctl release for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	return runtime.GOOS + "-" + runtime.GOARCH, oses[runtime.GOOS], arches[runtime.GOARCH]
}

// releaseServer serves a release directory as hack/release.sh lays it out, at BASE/VERSION/FILE
// like a GitHub release download: the CLI for this machine stamped with the version, and
// SHA256SUMS in sha256sum's format, of which sums may change lines.
func releaseServer(t *testing.T, exe, file string, sums func(string) string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), version)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	body, err := os.ReadFile(exe)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, file), body, 0o600))
	sum := sha256.Sum256(body)
	lines := fmt.Sprintf("%s  %s\n%s  CHANGELOG.md\n", hex.EncodeToString(sum[:]), file, strings.Repeat("0", 64))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(sums(lines)), 0o600))
	srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(dir))))
	t.Cleanup(srv.Close)
	return srv.URL
}

func buildSidecarctl(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "sidecarctl")
	cmd := exec.CommandContext(context.Background(), "go", "build", "-o", exe,
		"-ldflags", "-X github.com/sidecarops/sidecarops/internal/version.Version="+version, "../../cmd/sidecarctl")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return exe
}

type runner struct {
	temp, path, output string
	env                []string
}

// runStep runs a step's script as the runner does: bash -e with its env, the runner's variables,
// and GITHUB_PATH and GITHUB_OUTPUT files, from the repository's root as a checkout's workspace.
func (r runner) runStep(t *testing.T, s step, contexts map[string]string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), "bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", s.Run)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), r.env...)
	cmd.Env = append(cmd.Env, "RUNNER_TEMP="+r.temp, "GITHUB_PATH="+r.path, "GITHUB_OUTPUT="+r.output)
	for k, v := range s.Env {
		cmd.Env = append(cmd.Env, k+"="+evaluate(t, v, contexts))
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func newRunner(t *testing.T, env ...string) runner {
	t.Helper()
	dir := t.TempDir()
	r := runner{temp: filepath.Join(dir, "temp"), path: filepath.Join(dir, "path"), output: filepath.Join(dir, "output"), env: env}
	require.NoError(t, os.MkdirAll(r.temp, 0o755))
	for _, f := range []string{r.path, r.output} {
		require.NoError(t, os.WriteFile(f, nil, 0o600))
	}
	return r
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// The install step downloads the release's binary for the runner's platform, installs it only when
// SHA256SUMS agrees, and the check step runs it on the inputs; both as the runner runs them.
func TestActionInstallsAndChecks(t *testing.T) {
	a := readAction(t)
	require.Len(t, a.Runs.Steps, 2)
	install, check := a.Runs.Steps[0], a.Runs.Steps[1]
	require.Equal(t, "install", install.ID)
	file, runnerOS, runnerArch := platform(t)
	file = "sidecarctl-" + version + "-" + file
	exe := buildSidecarctl(t)
	same := func(s string) string { return s }

	for _, tc := range []struct {
		name        string
		version     string
		actionRef   string
		sums        func(string) string
		wantInstall string
		wantRefusal string
	}{
		{name: "the action's ref", actionRef: version, sums: same},
		{name: "the version input", version: version, actionRef: "main", sums: same},
		{name: "a branch as ref", actionRef: "main", sums: same,
			wantRefusal: "version 'main' is not a release (vX.Y.Z): give the action's version input"},
		{name: "checksum mismatch", version: version, sums: func(s string) string {
			return strings.Replace(s, s[:64], strings.Repeat("f", 64), 1)
		}, wantRefusal: ", not " + strings.Repeat("f", 64) + " as SHA256SUMS says: not installed"},
		{name: "no checksum", version: version, sums: func(s string) string {
			return strings.SplitN(s, "\n", 2)[1]
		}, wantRefusal: "/SHA256SUMS has no checksum of " + file},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := releaseServer(t, exe, file, tc.sums)
			r := newRunner(t, "RUNNER_OS="+runnerOS, "RUNNER_ARCH="+runnerArch, "SIDECARCTL_RELEASE_URL="+base)
			contexts := map[string]string{"inputs.version": tc.version, "github.action_ref": tc.actionRef}
			out, err := r.runStep(t, install, contexts)
			if tc.wantRefusal != "" {
				require.Error(t, err, "%s", out)
				assert.Contains(t, out, "::error title=sidecarctl install::")
				assert.Contains(t, out, tc.wantRefusal)
				assert.Empty(t, readFile(t, r.path), "nothing is added to PATH")
				assert.Empty(t, readFile(t, r.output))
				assert.NoFileExists(t, filepath.Join(r.temp, "sidecarctl-"+version, "sidecarctl"))
				return
			}
			require.NoError(t, err, "%s", out)
			dir := filepath.Join(r.temp, "sidecarctl-"+version)
			assert.Contains(t, out, "sidecarctl "+version, "the step prints the version installed")
			assert.Equal(t, dir+"\n", readFile(t, r.path))
			assert.Equal(t, "path="+dir+"/sidecarctl\n", readFile(t, r.output))
		})
	}

	t.Run("check", func(t *testing.T) {
		base := releaseServer(t, exe, file, same)
		r := newRunner(t, "RUNNER_OS="+runnerOS, "RUNNER_ARCH="+runnerArch, "SIDECARCTL_RELEASE_URL="+base)
		out, err := r.runStep(t, install, map[string]string{"inputs.version": version, "github.action_ref": ""})
		require.NoError(t, err, "%s", out)
		installed := strings.TrimPrefix(strings.TrimSpace(readFile(t, r.output)), "path=")
		for _, tc := range []struct {
			name                        string
			files, strict, bundle, args string
			wantExit                    int
			want                        []string
		}{
			{name: "clean", files: "examples/patch-metadata", strict: "true", bundle: "examples/whitelist-bundle",
				want: []string{"SidecarSet(s) checked: no errors"}},
			// Without the whitelist the same SidecarSet patches annotations nobody allowed.
			{name: "bundle", files: "examples/patch-metadata", strict: "false", wantExit: 1,
				want: []string{"::error file=examples/patch-metadata/"}},
			{name: "strict", files: "cmd/sidecarctl/testdata/ci/mistakes.yaml", strict: "true", wantExit: 1,
				want: []string{"::error file=cmd/sidecarctl/testdata/ci/mistakes.yaml,line=13,title=sidecarctl strict/update-strategy-type::"}},
			{name: "not strict", files: "cmd/sidecarctl/testdata/ci/mistakes.yaml", strict: "false", wantExit: 1,
				want: []string{"::warning file=cmd/sidecarctl/testdata/ci/mistakes.yaml,line=13,title=sidecarctl strict/update-strategy-type::"}},
			{name: "args", files: "cmd/sidecarctl/testdata/ci/mistakes.yaml", strict: "true", args: "--disable strict/update-strategy-type", wantExit: 1,
				want: []string{"line=14,title=sidecarctl strict/max-unavailable"}},
			{name: "bad strict", files: "examples/logging", strict: "yes", wantExit: 2,
				want: []string{"the strict input is 'yes', not true or false"}},
			{name: "no files", files: " ", strict: "false", wantExit: 2,
				want: []string{"the files input names nothing to check"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				out, err := r.runStep(t, check, map[string]string{
					"steps.install.outputs.path": installed,
					"inputs.files":               tc.files, "inputs.strict": tc.strict, "inputs.bundle": tc.bundle, "inputs.args": tc.args,
				})
				exit := 0
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					exit = ee.ExitCode()
				} else {
					require.NoError(t, err)
				}
				assert.Equal(t, tc.wantExit, exit, "%s", out)
				for _, w := range tc.want {
					assert.Contains(t, out, w)
				}
				if tc.name == "args" {
					assert.NotContains(t, out, "strict/update-strategy-type::", "--disable reached sidecarctl")
				}
			})
		}
	})
}

// The install step against a directory make release wrote (SIDECAROPS_RELEASE_DIR, as .ci/run sets it
// after its release): the file names and SHA256SUMS the action expects are the ones the release has.
func TestActionInstallsFromARelease(t *testing.T) {
	dir := os.Getenv("SIDECAROPS_RELEASE_DIR")
	if dir == "" {
		t.Skip("SIDECAROPS_RELEASE_DIR is not set: make release VERSION=vX.Y.Z writes one (dist/release/vX.Y.Z)")
	}
	dir, err := filepath.Abs(dir)
	require.NoError(t, err)
	released := filepath.Base(dir)
	_, runnerOS, runnerArch := platform(t)
	srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(dir))))
	t.Cleanup(srv.Close)
	r := newRunner(t, "RUNNER_OS="+runnerOS, "RUNNER_ARCH="+runnerArch, "SIDECARCTL_RELEASE_URL="+srv.URL)
	out, err := r.runStep(t, readAction(t).Runs.Steps[0], map[string]string{"inputs.version": "", "github.action_ref": released})
	require.NoError(t, err, "%s", out)
	assert.Contains(t, out, "sidecarctl "+released+" ", "the release's binary, stamped with its version")
	assert.Equal(t, "path="+filepath.Join(r.temp, "sidecarctl-"+released, "sidecarctl")+"\n", readFile(t, r.output))
}
