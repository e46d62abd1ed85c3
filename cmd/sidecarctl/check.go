package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

func checkCmd() *cobra.Command {
	var src sourceFlags
	cmd := &cobra.Command{
		Use:   "check -f PATH [-f PATH ...]",
		Short: "Default and validate SidecarSets: single-object rules, conflicts and the patch-metadata whitelist",
		Long: "check defaults every SidecarSet as the API server would, then validates it like the validating webhook\n" +
			"when the SidecarSets are created in input order: the single-object rules, conflicts with the SidecarSets\n" +
			"admitted before it, and the administrators' whitelist. It prints one line per error as\n" +
			"FILE: document N (Kind/Name): FIELD.PATH: message, documents that do not decode included, then how many\n" +
			"SidecarSets have errors, and exits 1 on any error.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, err := src.load(cmd, "ignored")
			if err != nil {
				return err
			}
			if len(w.problems) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "%d SidecarSet(s) checked: no errors\n", w.sidecarSetsGiven)
				return nil
			}
			return errors.Join(w.problems, errors.New(w.summary()))
		},
	}
	src.register(cmd.Flags())
	return cmd
}

// summary counts the errors and the SidecarSets they refuse, e.g. "4 error(s) in 2 of 3
// SidecarSet(s); 1 more elsewhere in the input".
func (w *workspace) summary() string {
	refused := map[string]bool{}
	inSidecarSets := 0
	for _, e := range w.problems {
		if e.Kind == "SidecarSet" {
			inSidecarSets++
			refused[e.String()] = true
		}
	}
	s := fmt.Sprintf("%d error(s) in %d of %d SidecarSet(s)", inSidecarSets, len(refused), w.sidecarSetsGiven)
	if other := len(w.problems) - inSidecarSets; other > 0 {
		s += fmt.Sprintf("; %d more elsewhere in the input", other)
	}
	return s
}
