package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarops/sidecarops/api/v1alpha1"
	"github.com/sidecarops/sidecarops/api/v1beta1"
	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarset/versions"
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
			"apps.kruise.io/sidecarset-custom-version becomes spec.customVersion, and back. SidecarSets already in that\n" +
			"version and documents of every other kind are printed unchanged; the items of a v1/List are printed as\n" +
			"documents of their own. What a conversion loses is a warning on stderr naming the object and the field.\n" +
			"Nothing is defaulted or validated: `sidecarctl check` does that.\n\n" +
			"A document that does not decode is reported on stderr and left out; the rest is printed and the exit\n" +
			"status is 1.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := outputFormat(output)
			if err != nil {
				return err
			}
			target, err := targetVersion(to)
			if err != nil {
				return err
			}
			w, err := src.read(cmd)
			if err != nil {
				return err
			}
			out := make([]runtime.Object, 0, len(w.objects))
			for _, o := range w.objects {
				obj, err := w.convert(o, target)
				if err != nil {
					w.fail(o, err)
					continue
				}
				out = append(out, obj)
			}
			if err := manifest.Encode(cmd.OutOrStdout(), format, out...); err != nil {
				return err
			}
			return w.err()
		},
	}
	// convert reads files and nothing else the other commands do (bundles, namespaces): it takes -f
	// from their shared flags rather than restating it.
	shared := pflag.NewFlagSet("", pflag.ContinueOnError)
	src.register(shared)
	cmd.Flags().AddFlag(shared.Lookup("filename"))
	cmd.Flags().StringVar(&to, "to", v1beta1.GroupVersion.Version, "version to write SidecarSets in: v1beta1 or v1alpha1 (or apps.kruise.io/VERSION)")
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	return cmd
}

// targetVersion accepts a SidecarSet version as --to names it, alone or with its group.
func targetVersion(to string) (schema.GroupVersion, error) {
	names := make([]string, 0, len(versions.Versions))
	for _, gv := range versions.Versions {
		if to == gv.Version || to == gv.String() {
			return gv, nil
		}
		names = append(names, gv.Version)
	}
	return schema.GroupVersion{}, fmt.Errorf("--to %q: unsupported SidecarSet version (%s)", to, strings.Join(names, " or "))
}

// customVersionLabel is where v1alpha1 keeps what v1beta1 has in spec.customVersion.
var customVersionLabel = field.NewPath("metadata", "labels").Key(v1alpha1.SidecarSetCustomVersionLabel).String()

// convert returns o's object with a SidecarSet in version to, converted as OpenKruise converts, and
// warns about what the conversion loses. Anything else is returned as read.
func (w *workspace) convert(o *manifest.Object, to schema.GroupVersion) (runtime.Object, error) {
	switch ss := o.Obj.(type) {
	case *v1alpha1.SidecarSet:
		if to != v1beta1.GroupVersion {
			return ss, nil
		}
		if ns := ss.Spec.Namespace; ns != "" && ss.Spec.NamespaceSelector != nil && !apiequality.Semantic.DeepEqual(ss.Spec.NamespaceSelector, v1beta1.NamespaceNamed(ns)) {
			w.warn(o.Report("spec.namespaceSelector", fmt.Sprintf("dropped: spec.namespace %q replaces it with the selector %s=%s, as OpenKruise converts", ns, v1beta1.NamespaceNameLabel, ns)))
		}
		if v, ok := ss.Labels[v1alpha1.SidecarSetCustomVersionLabel]; ok && v == "" {
			w.warn(o.Report(customVersionLabel, "dropped: an empty custom version is no spec.customVersion, as OpenKruise converts"))
		}
		written, err := versions.Of(ss)
		return written.Hub, err
	case *v1beta1.SidecarSet:
		if to != v1alpha1.GroupVersion {
			return ss, nil
		}
		if v, ok := ss.Labels[v1alpha1.SidecarSetCustomVersionLabel]; ok && v != ss.Spec.CustomVersion {
			reason := fmt.Sprintf("%q overwritten by spec.customVersion %q, as OpenKruise converts", v, ss.Spec.CustomVersion)
			if ss.Spec.CustomVersion == "" {
				reason = fmt.Sprintf("%q kept, but v1alpha1 reads it as the custom version, which spec.customVersion does not set", v)
			}
			w.warn(o.Report(customVersionLabel, reason))
		}
		alpha := &v1alpha1.SidecarSet{}
		return alpha, alpha.ConvertFrom(ss)
	}
	return o.Obj, nil
}
