package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

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
			if err := w.check(cmd.Context()); err != nil {
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
// error names file, SidecarSet and field, one line each. inject, explain and compile run it too, so
// they never act on a SidecarSet a cluster would have refused.
func (w *workspace) check(ctx context.Context) error {
	var lines []string
	for _, ss := range w.sidecarSets {
		errs := validation.SidecarSet(ss, nil, w.snapshot.Revisions(), w.snapshot)
		// As the webhook does, cross-object checks only run on an object that is valid by itself.
		if len(errs) == 0 {
			var err error
			if errs, err = w.policyErrors(ctx, ss); err != nil {
				return err
			}
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

// policyErrors asks the policies about conflicts and the whitelist, as field errors in a stable order.
func (w *workspace) policyErrors(ctx context.Context, ss *v1alpha1.SidecarSet) (field.ErrorList, error) {
	conflicts, err := w.snapshot.Conflicts(ctx, ss)
	if err != nil {
		return nil, err
	}
	denied, err := w.snapshot.Whitelist(ctx, ss)
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
