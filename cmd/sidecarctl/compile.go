package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sidecarops/sidecarops/bundles"
)

func compileCmd() *cobra.Command {
	var (
		src        sourceFlags
		out        string
		signingKey string
		signingAlg string
		keyID      string
	)
	cmd := &cobra.Command{
		Use:   "compile -f PATH [-f PATH ...] -o bundle.tar.gz [--signing-key KEY]",
		Short: "Compile SidecarSets, Namespaces and ControllerRevisions into an OPA bundle",
		Long: "compile writes the bundle the engine evaluates: normalised SidecarSets as data, the policies, and a\n" +
			"generated index module. Stock opa reads it: opa eval -b bundle.tar.gz -i input.json data.sidecarops.match.decision",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageError{errors.New("-o FILE is required")}
			}
			// load compiles the bundle and proves it prepares in the engine, so a broken bundle is never written.
			w, err := src.input(cmd, "ignored")
			if err != nil {
				return err
			}
			// A bundle is shipped as it is: one without a SidecarSet that was meant to be in it would
			// look complete.
			if err := w.Err(); err != nil {
				return errors.Join(err, fmt.Errorf("%s not written", out))
			}
			b, err := w.Compiler.Bundle()
			if err != nil {
				return err
			}
			if signingKey != "" {
				key, err := os.ReadFile(signingKey)
				if err != nil {
					return fmt.Errorf("--signing-key: %w", err)
				}
				if err := bundles.Sign(b, string(key), signingAlg, keyID); err != nil {
					return err
				}
			}
			var buf bytes.Buffer
			if err := bundles.Write(&buf, b); err != nil {
				return err
			}
			if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: revision %s, %d SidecarSet(s)\n", out, b.Manifest.Revision, len(w.SidecarSets))
			return nil
		},
	}
	src.register(cmd.Flags())
	cmd.Flags().StringVarP(&out, "output", "o", "", "bundle file to write (.tar.gz)")
	cmd.Flags().StringVar(&signingKey, "signing-key", "", "PEM private key to sign the bundle with")
	cmd.Flags().StringVar(&signingAlg, "signing-alg", "RS256", "signing algorithm (RS256, ES256, ...)")
	cmd.Flags().StringVar(&keyID, "key-id", bundles.DefaultKeyID, "key id written into the signature")
	return cmd
}
