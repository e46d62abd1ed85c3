package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sidecarops/sidecarops/internal/injector"
)

func checkCmd() *cobra.Command {
	var src sourceFlags
	cmd := &cobra.Command{
		Use:   "check -f PATH [-f PATH ...]",
		Short: "Default and validate SidecarSets: single-object rules, conflicts and the patch-metadata whitelist",
		Long: "check defaults every SidecarSet as the API server would, then validates it like the validating webhook:\n" +
			"the single-object rules, conflicts with the other SidecarSets given, and the administrators' whitelist.\n" +
			"It prints one line per error as FILE: SidecarSet/NAME: FIELD.PATH: message and exits 1 on any error.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, err := src.load(cmd.Context(), cmd.InOrStdin())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d SidecarSet(s) checked: no errors\n", len(w.sidecarSets))
			return nil
		},
	}
	src.register(cmd.Flags())
	return cmd
}

// check validates every SidecarSet as the validating webhook would have before admitting it: an
// error names file, SidecarSet and field, one line each. load runs it, so every command refuses
// what a cluster would have refused.
func (w *workspace) check(ctx context.Context) error {
	var lines []string
	for _, ss := range w.sidecarSets {
		errs, err := injector.ValidateSidecarSet(ctx, w.snapshot, ss, nil)
		if err != nil {
			return err
		}
		for _, e := range errs {
			lines = append(lines, fmt.Sprintf("%s: SidecarSet/%s: %s", w.origin[ss].Source, ss.Name, e.Error()))
		}
	}
	if len(lines) > 0 {
		lines = append(lines, fmt.Sprintf("%d error(s) in %d SidecarSet(s)", len(lines), len(w.sidecarSets)))
		return errors.New(strings.Join(lines, "\n"))
	}
	return nil
}
