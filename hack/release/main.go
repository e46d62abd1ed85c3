package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/sigstore/sigstore/pkg/signature"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("a command is required: chart, attach, verify or push")
	}
	commands := map[string]func(context.Context, []string) error{
		"chart": runChart, "attach": runAttach, "verify": runVerify, "push": runPush,
	}
	cmd, ok := commands[args[0]]
	if !ok {
		return fmt.Errorf("unknown command %q: chart, attach, verify or push", args[0])
	}
	return cmd(ctx, args[1:])
}

// parse parses a command's flags and refuses positional arguments unless the command takes them.
func parse(fs *flag.FlagSet, args []string, positional bool) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !positional && fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	return nil
}

func required(fs *flag.FlagSet, names ...string) error {
	for _, n := range names {
		if fs.Lookup(n).Value.String() == "" {
			return fmt.Errorf("%s: --%s is required", fs.Name(), n)
		}
	}
	return nil
}

func runChart(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("chart", flag.ContinueOnError)
	tgz := fs.String("chart", "", "the packaged chart (helm package's .tgz)")
	registry := fs.String("registry", "", "the registry prefix: the chart is REGISTRY/charts/NAME:VERSION")
	epoch := fs.Int64("epoch", -1, "the creation time in the manifest, in Unix seconds (the release's SOURCE_DATE_EPOCH)")
	out := fs.String("out", "", "the OCI layout directory to write")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if err := required(fs, "chart", "registry", "out"); err != nil {
		return err
	}
	if *epoch < 0 {
		return errors.New("chart: --epoch is required: the manifest's creation time is the release's")
	}
	ref, err := chartLayout(*tgz, *registry, time.Unix(*epoch, 0), *out)
	if err != nil {
		return err
	}
	fmt.Println("oci://" + ref)
	return nil
}

func runAttach(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("attach", flag.ContinueOnError)
	dir := fs.String("layout", "", "the image's OCI layout, as make images writes it")
	repo := fs.String("repository", "", "the image's repository, REGISTRY/NAME")
	sbomFile := fs.String("sbom", "", "where to write the image's CycloneDX SBOM (JSON)")
	out := fs.String("out", "", "the OCI layout directory of the attachments to write")
	key := fs.String("key", "", "the signing key (PEM; cosign's encrypted keys take COSIGN_PASSWORD); none: nothing is signed")
	pubOut := fs.String("public-key-out", "", "with --key, where to write its public key (cosign.pub)")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if err := required(fs, "layout", "repository", "sbom", "out"); err != nil {
		return err
	}
	img, err := readImage(*dir)
	if err != nil {
		return err
	}
	bom, err := sbom(img, *repo)
	if err != nil {
		return err
	}
	doc, err := encodeSBOM(bom)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*sbomFile, doc, 0o644); err != nil { //nolint:gosec // G306: an SBOM is published
		return err
	}
	var signer signature.Signer
	if *key != "" {
		if signer, err = loadSigner(*key); err != nil {
			return err
		}
		if *pubOut != "" {
			pub, err := publicKeyPEM(signer)
			if err != nil {
				return err
			}
			if err := os.WriteFile(*pubOut, pub, 0o644); err != nil { //nolint:gosec // G306: a public key
				return err
			}
		}
	}
	manifests, err := attachments(img, *repo, doc, signer)
	if err != nil {
		return err
	}
	if err := writeLayout(*out, manifests); err != nil {
		return err
	}
	state := "signed"
	if signer == nil {
		state = "UNSIGNED (no signing key)"
	}
	fmt.Printf("%s@%s: SBOM of %d components, %s\n", *repo, img.Digest, len(*bom.Components), state)
	return nil
}

func runVerify(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	dir := fs.String("layout", "", "the image's OCI layout")
	repo := fs.String("repository", "", "the image's repository, REGISTRY/NAME")
	att := fs.String("attachments", "", "the attachments' OCI layout")
	key := fs.String("key", "", "the public key (PEM)")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if err := required(fs, "layout", "repository", "attachments", "key"); err != nil {
		return err
	}
	img, err := readImage(*dir)
	if err != nil {
		return err
	}
	v, err := loadVerifier(*key)
	if err != nil {
		return err
	}
	sbomImg, err := attachment(*att, cosignTag(*repo, img.Digest, sbomSuffix))
	if err != nil {
		return err
	}
	sbomDigest, err := sbomImg.Digest()
	if err != nil {
		return err
	}
	if err := verify(*att, *repo, img.Digest, v); err != nil {
		return err
	}
	if err := verify(*att, *repo, sbomDigest, v); err != nil {
		return fmt.Errorf("the SBOM's signature: %w", err)
	}
	fmt.Printf("%s@%s: signature and SBOM signature verified\n", *repo, img.Digest)
	return nil
}

func runPush(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	registry := fs.String("registry", "", "the registry prefix every manifest must be published under")
	insecure := fs.Bool("insecure", false, "allow plain HTTP to the registry (a test registry)")
	overwrite := fs.Bool("overwrite", false, "move a tag the registry holds for another digest")
	timeout := fs.Duration("timeout", 10*time.Minute, "the longest the whole push may take")
	if err := parse(fs, args, true); err != nil {
		return err
	}
	if err := required(fs, "registry"); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("push: name the release's chart and attachment archives (*.oci.tar)")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	o := pushOptions{Registry: *registry, Insecure: *insecure, Overwrite: *overwrite, Keychain: authn.DefaultKeychain}
	for _, file := range fs.Args() {
		pushed, err := pushArchive(ctx, o, file)
		if err != nil {
			return err
		}
		for _, p := range pushed {
			fmt.Println(p)
		}
	}
	return nil
}
