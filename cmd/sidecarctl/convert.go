package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/convert"
)

func convertCmd() *cobra.Command {
	var (
		src    sourceFlags
		to     string
		output string
	)
	cmd := &cobra.Command{
		Use:   "convert -f PATH [-f PATH ...] [--to v1beta1|v1alpha1] [-o yaml|json]",
		Short: "Rewrite SidecarSets in another apiVersion, as kubectl convert does for built-in kinds",
		Long: "convert prints the documents read, in input order, with every SidecarSet in the version --to (default\n" +
			"v1beta1, the storage version), converted as OpenKruise converts: a v1alpha1 spec.namespace becomes a\n" +
			"namespaceSelector on the label kubernetes.io/metadata.name, and the label\n" +
			"apps.kruise.io/sidecarset-custom-version becomes spec.customVersion, and back. Nothing is lost: what one\n" +
			"version has no place for is kept in the annotation " + v1alpha1.V1alpha1FieldsAnnotation + " or\n" +
			v1alpha1.V1beta1FieldsAnnotation + ", as the API server stores it, and converting back gives the original.\n" +
			"SidecarSets already in that version and documents of every other kind are printed unchanged; the items\n" +
			"of a v1/List are printed as documents of their own.\n" +
			"Nothing is defaulted or validated: `sidecarctl check` does that.\n\n" +
			"A document that does not decode is reported on stderr and left out; the rest is printed and the exit\n" +
			"status is 1.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(output)
			if err != nil {
				return err
			}
			target, err := convert.Target(to)
			if err != nil {
				return usageError{err}
			}
			w, err := src.read(cmd)
			if err != nil {
				return err
			}
			if err := manifest.Encode(cmd.OutOrStdout(), format, convert.Objects(w, target)...); err != nil {
				return err
			}
			return w.Err()
		},
	}
	// convert reads files and nothing else the other commands do (bundles, namespaces): it takes -f
	// and its bound from their shared flags rather than restating them.
	shared := pflag.NewFlagSet("", pflag.ContinueOnError)
	src.register(shared)
	cmd.Flags().AddFlag(shared.Lookup("filename"))
	cmd.Flags().AddFlag(shared.Lookup(maxDocumentBytesFlag))
	cmd.Flags().AddFlag(shared.Lookup(stdinFilenameFlag))
	cmd.Flags().StringVar(&to, "to", v1beta1.GroupVersion.Version, "version to write SidecarSets in: v1beta1 or v1alpha1 (or apps.kruise.io/VERSION)")
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	return cmd
}
