package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sidecarops/sidecarops/internal/sidecarctl/check"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/findings"
)

func checkCmd() *cobra.Command {
	var (
		src       sourceFlags
		install   installFlags
		requester requesterFlags
		output    string
		strict    bool
		rules     ruleFlags
	)
	cmd := &cobra.Command{
		Use:   "check -f PATH [-f PATH ...] [--bundle PATH] [--as USER [--as-group GROUP]] [--strict] [--disable RULE] [--enable RULE] [-o text|json|github]",
		Short: "Default and validate SidecarSets, and the pods of the workloads once injected",
		Long: "check defaults every SidecarSet as the API server would, then validates it like the validating webhook\n" +
			"when the SidecarSets are created in input order: the single-object rules, conflicts with the SidecarSets\n" +
			"admitted before it, and the administrators' whitelist. It injects every workload and validates its pods\n" +
			"as the API server would. It reports every problem of a document in one run, one line each as\n" +
			"FILE:LINE: document N (Kind/Name): FIELD.PATH: message, then how many SidecarSets have errors.\n\n" +
			"It asks the SidecarSet policies of the --bundle bundles about every SidecarSet as admission would, as the\n" +
			"user --as and groups --as-group, over the Namespaces and workloads of the input (with --kubeconfig, the\n" +
			"cluster's too, and an UPDATE of its SidecarSet of that name): deny findings are errors (policy/RULE),\n" +
			"warn findings warnings, dryrun findings notes; so are the Pod Security levels the sidecars fail\n" +
			"(pod-security).\n\n" +
			"Strict findings — what OpenKruise admits but is almost certainly a mistake (an updateStrategy.type\n" +
			"typo, strategy fields the type ignores, maxUnavailable over 100%, a workload volume that shadows a\n" +
			"sidecar's) — are warnings, and errors with --strict, the setting for CI, which makes the policies' and\n" +
			"Pod Security's warnings errors too. The strict policy is built in (policies/strict); a --bundle with\n" +
			"its root sidecarsets/strict replaces it.\n\n" +
			"Every finding has a rule (docs/cli.md lists them). --disable RULE silences a warning, note or strict rule,\n" +
			"--enable RULE turns on one that is off by default (" + findings.RuleSelectorMatchesNothing + "), and the annotation\n" +
			findings.DisableAnnotation + ": \"RULE,...\" silences rules on one SidecarSet or workload. What a cluster\n" +
			"refuses, a policy's deny findings included, is never silenced.\n\n" +
			"-o json prints the findings as one JSON document, -o github as GitHub Actions annotations.\n" +
			"Exit status: 0 clean (warnings and notes allowed without --strict), 1 findings, 2 usage error.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case findings.Text, findings.JSON, findings.GitHub:
			default:
				return usageError{fmt.Errorf("-o %q: unsupported output format (text, json or github)", output)}
			}
			user, err := requester.userInfo()
			if err != nil {
				return err
			}
			if output != findings.Text {
				// Warnings are findings of the document printed; nothing else is said.
				cmd.SetErr(io.Discard)
			}
			src.keepWarnings, src.strictPolicy = true, true
			w, err := src.input(cmd, "ignored")
			if err != nil {
				return err
			}
			// The strict policy's rules are known once its bundle is: the shipped one or a --bundle's.
			rs := findings.NewRuleSet(w.StrictRules)
			enabled, err := rules.enabled(rs)
			if err != nil {
				return err
			}
			view, err := install.view(cmd.Context(), w.Namespaces, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			var cluster *check.ClusterState
			if install.cluster.given() {
				cfg, err := install.cluster.restConfig()
				if err != nil {
					return err
				}
				if cluster, err = check.ReadCluster(cmd.Context(), cfg, install.cluster.String()); err != nil {
					return err
				}
			}
			if err := check.WarnUnseen(cmd.Context(), w, view, src.namespace); err != nil {
				return err
			}
			fs, silenced, err := check.Findings(cmd.Context(), w, check.Options{Strict: strict, Rules: rs, Enabled: enabled,
				Namespace: src.namespace, View: view, Review: check.NewReviewer(w, user, src.namespace, cluster)})
			if err != nil {
				return err
			}
			n, err := findings.Write(cmd.OutOrStdout(), cmd.ErrOrStderr(), output, strict, fs,
				findings.Summary{Silenced: silenced, SidecarSets: w.SidecarSetsGiven, Workloads: len(w.Workloads)})
			if err == nil && n.Errors > 0 {
				return exitStatus(1)
			}
			return err
		},
	}
	src.register(cmd.Flags())
	install.register(cmd.Flags())
	requester.register(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json or github (workflow annotations)")
	cmd.Flags().BoolVar(&strict, "strict", false, "report strict findings, and the SidecarSet policies' and Pod Security's warnings, as errors: the setting for CI")
	rules.register(cmd.Flags())
	return cmd
}
