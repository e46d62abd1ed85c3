package main

import (
	"context"
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
	root := &cobra.Command{
		Use:   "sidecarctl",
		Short: "Inject, check and explain OpenKruise SidecarSets offline, with the sidecarops policies",
		Long: "sidecarctl shows offline exactly what the sidecarops (and OpenKruise) webhook would do to your pods:\n" +
			"it reads SidecarSets, Namespaces, ControllerRevisions, the kruise-configuration ConfigMap and workloads\n" +
			"from files and prints the injected workloads. Every decision is made by the Rego policies.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(injectCmd(), checkCmd(), explainCmd(), compileCmd(), policyCmd(), rolloutCmd(), migrateCmd(), convertCmd(), versionCmd())
	root.Version = version.Get().String("sidecarctl")
	root.SetVersionTemplate("{{.Version}}\n")
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
