package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sidecarops/sidecarops/internal/manifest"
	"github.com/sidecarops/sidecarops/internal/sidecarctl/workspace"
)

// maxDocumentBytesFlag bounds what one document of -f may cost to decode, maxInputBytesFlag what
// all of them may.
const (
	maxDocumentBytesFlag = "max-document-bytes"
	maxInputBytesFlag    = "max-input-bytes"
)

// sourceFlags are the inputs every subcommand that reads manifests shares.
type sourceFlags struct {
	files            []string
	maxDocumentBytes int64
	maxInputBytes    int64
	adminBundles     []string
	verificationKeys []string
	verificationAlg  string
	verificationScp  string
	defaultsAllowed  bool
	namespace        string
	stdinName        string
	// keepWarnings keeps warnings for the command to report rather than printing them as they are
	// found: check, which prints each with its rule, or not at all when the rule is silenced.
	keepWarnings bool
	// strictPolicy adds the shipped strict policy to the administrators' bundles unless one of them
	// provides its root: check, which reports its findings.
	strictPolicy bool
}

func (f *sourceFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVarP(&f.files, "filename", "f", nil, "manifest file, directory (recursive *.yaml, *.yml, *.json; kustomization files skipped) or - for stdin; repeatable")
	fs.Int64Var(&f.maxDocumentBytes, maxDocumentBytesFlag, manifest.DefaultMaxDocumentBytes, "largest size of one document of -f, as written and as JSON with its YAML aliases and escapes expanded; a larger one is reported and skipped")
	fs.Int64Var(&f.maxInputBytes, maxInputBytesFlag, manifest.DefaultMaxInputBytes, "largest size of all documents of -f together, each counted as for --"+maxDocumentBytesFlag+"; the document that goes over is reported and nothing after it is read")
	fs.StringArrayVar(&f.adminBundles, "bundle", nil, "administrators' bundle (directory or .tar.gz) with roots whitelist, gates and/or under sidecarsets (SidecarSet policies, which check evaluates); repeatable")
	fs.StringArrayVar(&f.verificationKeys, "verification-key", nil, "PEM public key that --bundle signatures must verify against (key id: file name without extension); repeatable. When given, unsigned bundles are refused")
	fs.StringVar(&f.verificationAlg, "verification-alg", "RS256", "signature algorithm of the verification keys")
	fs.StringVar(&f.verificationScp, "verification-scope", "", "required scope claim of bundle signatures")
	fs.BoolVar(&f.defaultsAllowed, "patch-metadata-defaults-allowed", false, "feature gate SidecarSetPatchPodMetadataDefaultsAllowed: allow patchPodMetadata when no whitelist applies (ignored when a --bundle provides the whitelist)")
	fs.StringVarP(&f.namespace, "namespace", "n", "default", "namespace of workloads that name none")
	fs.StringVar(&f.stdinName, stdinFilenameFlag, "", "with -f -, the file that standard input's documents are reported in; a document under helm's \"# Source: FILE\" comment is reported in FILE")
}

// stdinFilenameFlag names standard input in what is reported.
const stdinFilenameFlag = "stdin-filename"

// input reads the manifests and bundles as workspace.Load says; others says what the command does
// with documents of kinds sidecarctl does not read.
func (f *sourceFlags) input(cmd *cobra.Command, others string) (*workspace.Workspace, error) {
	opts, err := f.options(cmd, others)
	if err != nil {
		return nil, err
	}
	return workspace.Load(cmd.Context(), opts)
}

// read is input without its judging (workspace.Read): convert's.
func (f *sourceFlags) read(cmd *cobra.Command) (*workspace.Workspace, error) {
	opts, err := f.options(cmd, "")
	if err != nil {
		return nil, err
	}
	return workspace.Read(opts)
}

// options are the flags as the workspace takes them; no -f, a bound that is not positive and
// --stdin-filename without -f - are usage errors.
func (f *sourceFlags) options(cmd *cobra.Command, others string) (workspace.Options, error) {
	if len(f.files) == 0 {
		return workspace.Options{}, usageError{errors.New("no input: give at least one -f PATH")}
	}
	for _, limit := range []struct {
		flag  string
		value int64
	}{{maxDocumentBytesFlag, f.maxDocumentBytes}, {maxInputBytesFlag, f.maxInputBytes}} {
		if limit.value <= 0 {
			return workspace.Options{}, usageError{fmt.Errorf("--%s %d: must be positive", limit.flag, limit.value)}
		}
	}
	if f.stdinName != "" && !slices.Contains(f.files, manifest.Stdin) {
		return workspace.Options{}, usageError{fmt.Errorf("--%s %s: standard input is not read (no -f -)", stdinFilenameFlag, f.stdinName)}
	}
	return workspace.Options{
		Files: f.files, Stdin: cmd.InOrStdin(), StdinName: f.stdinName,
		Reader: manifest.Reader{
			MaxDocumentBytes: f.maxDocumentBytes, DocumentLimitName: "--" + maxDocumentBytesFlag,
			MaxInputBytes: f.maxInputBytes, InputLimitName: "--" + maxInputBytesFlag,
		},
		AdminBundles: f.adminBundles, VerificationKeys: f.verificationKeys, VerificationAlg: f.verificationAlg,
		VerificationScope: f.verificationScp, DefaultsAllowed: f.defaultsAllowed,
		Stderr: cmd.ErrOrStderr(), KeepWarnings: f.keepWarnings, StrictPolicy: f.strictPolicy, Others: others,
	}, nil
}
