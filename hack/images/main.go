package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"golang.org/x/mod/modfile"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "push" {
		return runPush(ctx, args[1:])
	}
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	version := fs.String("version", "", "the version stamped into the binaries, the image label and the tag (required)")
	commit := fs.String("commit", "", "the commit stamped into the binaries and the revision label (required)")
	epoch := fs.Int64("epoch", -1, "the time of every file and of the image, in Unix seconds; default: $SOURCE_DATE_EPOCH, else the time of the checkout's last commit")
	out := fs.String("out", filepath.Join("dist", "images"), "directory of the OCI layouts and digests.txt")
	caBundle := fs.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle copied into the images")
	registry := fs.String("registry", defaultRegistry, "the registry prefix of the image names in digests.txt (REGISTRY/manager, REGISTRY/agent)")
	goCmd := fs.String("go", "go", "the go command that builds the binaries")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *version == "" || *commit == "" {
		return errors.New("--version and --commit are required")
	}
	root, err := productRoot()
	if err != nil {
		return err
	}
	when, err := sourceDate(ctx, *epoch, root)
	if err != nil {
		return err
	}
	built, err := build(ctx, options{
		Version:   *version,
		Commit:    *commit,
		Epoch:     when,
		CABundle:  *caBundle,
		Root:      root,
		Out:       *out,
		Registry:  *registry,
		Go:        *goCmd,
		Images:    images,
		Platforms: platforms,
	})
	if err != nil {
		return err
	}
	for _, b := range built {
		fmt.Println(b.Ref())
	}
	return nil
}

func runPush(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("images push", flag.ContinueOnError)
	in := fs.String("in", filepath.Join("dist", "images"), "directory of the OCI layouts make images wrote")
	registry := fs.String("registry", defaultRegistry, "the registry prefix to push to: REGISTRY/manager:TAG, REGISTRY/agent:TAG")
	version := fs.String("version", "", "the tag the layouts must hold (default: whatever they hold)")
	insecure := fs.Bool("insecure", false, "allow plain HTTP to the registry (a test registry; localhost and private addresses need no flag)")
	timeout := fs.Duration("timeout", 10*time.Minute, "the longest each image's push may take")
	overwrite := fs.Bool("overwrite", false, "move a tag the registry holds for another digest (a published version is otherwise left as it is)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("push: unexpected arguments %q", fs.Args())
	}
	if *timeout <= 0 {
		return fmt.Errorf("push: --timeout %s: must be positive", *timeout)
	}
	pushed, err := push(ctx, pushOptions{
		In:        *in,
		Registry:  *registry,
		Version:   *version,
		Insecure:  *insecure,
		Overwrite: *overwrite,
		Timeout:   *timeout,
		// `docker login` and `podman login` credentials, and the credential helpers they name.
		Keychain: authn.DefaultKeychain,
		Images:   images,
	})
	if err != nil {
		return err
	}
	for _, b := range pushed {
		fmt.Println(b.Ref())
	}
	return nil
}

// productModule is the module whose commands the images hold; this one, a module of its own so that
// go-containerregistry stays out of the product's go.mod, sits in its checkout.
const productModule = "github.com/sidecarops/sidecarops"

// productRoot is the directory of productModule's go.mod, the first one declaring it above the working
// directory, so that the packages, LICENSE and go build resolve the same from anywhere in the checkout
// (go run and go test run in hack/images).
func productRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod")) //nolint:gosec // G304: the go.mod files above the working directory
		if err == nil && modfile.ModulePath(data) == productModule {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory: run inside the sidecarops checkout", productModule)
		}
		dir = parent
	}
}

// sourceDate is the one time an image carries. It comes from the commit, never from the clock, so that
// two builds of a commit agree (https://reproducible-builds.org/docs/source-date-epoch/).
func sourceDate(ctx context.Context, flagEpoch int64, root string) (time.Time, error) {
	if flagEpoch >= 0 {
		return time.Unix(flagEpoch, 0).UTC(), nil
	}
	if env := os.Getenv("SOURCE_DATE_EPOCH"); env != "" {
		secs, err := strconv.ParseInt(env, 10, 64)
		if err != nil || secs < 0 {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: not a Unix time in seconds", env)
		}
		return time.Unix(secs, 0).UTC(), nil
	}
	cmd := exec.CommandContext(ctx, "git", "log", "-1", "--format=%ct")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return time.Time{}, fmt.Errorf("git log -1 --format=%%ct (the commit's time, for SOURCE_DATE_EPOCH): %w", err)
	}
	secs, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("git log -1 --format=%%ct printed %q: %w", out, err)
	}
	return time.Unix(secs, 0).UTC(), nil
}
