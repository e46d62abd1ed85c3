package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/sidecarops/sidecarops/internal/version"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is main without the process: tests call it with their own streams.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := rootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	var status exitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &status):
		return int(status)
	}
	fmt.Fprintln(stderr, err)
	// At the root, only the command line can be wrong (an unknown command).
	if errors.As(err, new(usageError)) || cmd == root {
		return exitUsage
	}
	return 1
}

// rootCmd is sidecarctl's command tree.
func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "sidecarctl",
		Short: "Inject, check and explain OpenKruise SidecarSets offline, with the sidecarops policies",
		Long: "sidecarctl shows offline exactly what the sidecarops (and OpenKruise) webhook would do to your pods:\n" +
			"it reads SidecarSets, Namespaces, ControllerRevisions, the kruise-configuration ConfigMap and workloads\n" +
			"from files and prints the injected workloads. Every decision is made by the Rego policies.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(injectCmd(), checkCmd(), explainCmd(), compileCmd(), policyCmd(), rolloutCmd(), migrateCmd(), convertCmd(), versionCmd())
	root.Version = version.Get().String("sidecarctl")
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	markUsageErrors(root)
	return root
}

// exitUsage is the exit status of a command line that cannot be run as written; 1 is that of
// what a command found.
const exitUsage = 2

// usageError is a command line that cannot be run as written: an unknown command or flag, a bad
// flag value or argument, no input.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// exitStatus ends a command with that status and nothing more to print: it has printed what it
// found.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// markUsageErrors makes every argument check of c and its subcommands a usage error. A command
// that only groups others (rollout, policy, migrate) prints its help, as cobra would, but refuses
// an argument: cobra would print the help for `rollout plna` too, and exit 0.
func markUsageErrors(c *cobra.Command) {
	if c.HasParent() && c.HasSubCommands() && !c.Runnable() {
		c.Args = cobra.NoArgs
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		markUsageErrors(sub)
	}
}
