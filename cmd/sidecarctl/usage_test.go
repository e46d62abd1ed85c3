package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
)

// commandPaths are the words that run each command of the tree, the root's (none) included.
func commandPaths(c *cobra.Command, prefix []string) [][]string {
	out := [][]string{prefix}
	for _, sub := range c.Commands() {
		if sub.Name() == "help" || sub.Name() == "completion" {
			continue
		}
		out = append(out, commandPaths(sub, append(append([]string{}, prefix...), sub.Name()))...)
	}
	return out
}

// Issue 36 item 8: a command line that cannot be run as written exits 2, whatever the command:
// an unknown flag, an argument where none (or fewer) is taken, an unknown subcommand, a bad flag
// value, a missing required flag. 1 is left to what a command finds.
func TestUsageErrorsExit2(t *testing.T) {
	root := rootCmd()
	paths := commandPaths(root, nil)
	assert.Greater(t, len(paths), 10, "every command of the tree")
	for _, path := range paths {
		name := strings.Join(append([]string{"sidecarctl"}, path...), " ")
		cmd, _, err := root.Find(path)
		if !assert.NoError(t, err, name) {
			continue
		}
		t.Run(name+" --no-such-flag", func(t *testing.T) {
			_, errOut, code := sidecarctlWithLines(t, "", append(path, "--no-such-flag")...)
			assert.Equal(t, exitUsage, code, errOut)
			assert.Contains(t, errOut, "unknown flag: --no-such-flag")
		})
		// An argument more than the command takes: two, for rollout plan, which takes a name.
		extra := []string{"no-such-argument", "another"}
		if cmd.Args == nil || cmd.Args(cmd, extra) == nil {
			continue // policy test takes directories
		}
		t.Run(name+" with arguments", func(t *testing.T) {
			_, errOut, code := sidecarctlWithLines(t, "", append(path, extra...)...)
			assert.Equal(t, exitUsage, code, errOut)
		})
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"check"}, "no input: give at least one -f PATH"},
		{[]string{"inject"}, "no input: give at least one -f PATH"},
		{[]string{"explain"}, "no input: give at least one -f PATH"},
		{[]string{"convert"}, "no input: give at least one -f PATH"},
		{[]string{"compile", "-f", "examples/logging"}, "-o FILE is required"},
		{[]string{"rollout", "plan"}, "give -f files, or the SidecarSet's name"},
		{[]string{"check", "-f", "examples/logging", "-o", "xml"}, `-o "xml": unsupported output format`},
		{[]string{"inject", "-f", "examples/logging", "-o", "xml"}, `-o "xml": unsupported output format`},
		{[]string{"inject", "-f", "examples/logging", "--timestamp", "yesterday"}, `--timestamp "yesterday": not RFC3339`},
		{[]string{"check", "-f", "examples/logging", "--max-document-bytes", "0"}, "--max-document-bytes 0: must be positive"},
		{[]string{"check", "-f", "examples/logging", "--max-input-bytes", "lots"}, `invalid argument "lots"`},
		{[]string{"check", "-f", "examples/logging", "--strict=maybe"}, `invalid argument "maybe"`},
		{[]string{"check", "-f", "examples/logging", "--disable", "pod"}, "--disable pod: what a cluster refuses cannot be disabled"},
		{[]string{"explain", "-f", "examples/logging", "--install-values", "v.yaml", "--kubeconfig", "k"}, "give one, not both"},
		{[]string{"rollout", "plan", "-f", "examples/logging", "--rounds", "-1"}, "--rounds: -1 is negative"},
		{[]string{"rollout", "plan", "-f", "examples/logging", "-o", "yaml"}, `--output: "yaml" is not text or json`},
		{[]string{"convert", "-f", "examples/logging", "--to", "v2"}, `--to "v2": unsupported SidecarSet version`},
		{[]string{"convert", "-f", "examples/logging", "-o", "xml"}, `-o "xml": unsupported output format`},
		{[]string{"policy", "test", "--threshold", "most"}, `invalid argument "most"`},
		{[]string{"version", "-o", "xml"}, `-o "xml": want text or json`},
		{[]string{"rollout", "plna"}, `unknown command "plna" for "sidecarctl rollout"`},
		{[]string{"no-such-command"}, `unknown command "no-such-command" for "sidecarctl"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, code := sidecarctlWithLines(t, "", tc.args...)
			assert.Equal(t, exitUsage, code, errOut)
			assert.Empty(t, out)
			assert.Contains(t, errOut, tc.want)
		})
	}

	// A command that groups others still prints its help, as cobra does.
	out, _, code := sidecarctlWithLines(t, "", "rollout")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "plan")
}
