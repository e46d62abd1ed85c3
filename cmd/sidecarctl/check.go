package main

import (
	"fmt"
	"sort"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/validation"
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
			lookup := validation.NewStaticLookup(w.sidecarSets...)
			count := 0
			for _, ss := range w.sidecarSets {
				errs := validation.SidecarSet(ss, nil, w.revSource, lookup)
				// As the webhook does, cross-object checks only run on an object that is valid by itself.
				if len(errs) == 0 {
					errs, err = policyErrors(cmd, w, ss)
					if err != nil {
						return err
					}
				}
				o := w.origin[ss]
				for _, e := range errs {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: SidecarSet/%s: %s\n", o.Source, ss.Name, e.Error())
				}
				count += len(errs)
			}
			if count > 0 {
				return fmt.Errorf("%d error(s) in %d SidecarSet(s)", count, len(w.sidecarSets))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d SidecarSet(s) checked: no errors\n", len(w.sidecarSets))
			return nil
		},
	}
	src.register(cmd.Flags())
	return cmd
}

// policyErrors asks the policies about conflicts and the whitelist, as field errors in a stable order.
func policyErrors(cmd *cobra.Command, w *workspace, ss *v1alpha1.SidecarSet) (field.ErrorList, error) {
	conflicts, err := w.snapshot.Conflicts(cmd.Context(), ss)
	if err != nil {
		return nil, err
	}
	denied, err := w.snapshot.Whitelist(cmd.Context(), ss)
	if err != nil {
		return nil, err
	}
	var errs field.ErrorList
	for _, v := range append(conflicts, denied...) {
		errs = append(errs, v.FieldError())
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs, nil
}
