package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sidecarops/sidecarops/bundles"
	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/manager"
)

// cluster is shared by every test: starting kube-apiserver takes seconds, and the tests use their
// own namespaces and SidecarSet names.
var cluster *devcluster.Cluster

// metricsAddr is where the manager serves its metrics, as in a cluster: HTTPS, authenticated and
// authorized by the API server.
var metricsAddr string

// The administrators' whitelist bundle the manager watches on disk, and the key pair it must be
// signed with (the manager runs with --verification-key).
var (
	whitelistPath string
	signingKey    string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sidecarops-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	pub, err := keyPair(&signingKey)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pubPath := filepath.Join(dir, "public.pem")
	whitelistPath = filepath.Join(dir, "whitelist.tar.gz")
	if err := os.WriteFile(pubPath, []byte(pub), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := writeWhitelist(whitelistPath, signingKey, "^e2e\\.example\\.com/allowed$"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if metricsAddr, err = devcluster.FreeAddr(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, err = devcluster.Start(ctx, devcluster.Options{Root: "../..", Manager: manager.Options{
		MetricsAddr:        metricsAddr,
		Bundles:            []string{whitelistPath},
		BundlePollInterval: 200 * time.Millisecond,
		VerificationKeys:   []string{pubPath},
		BundlePersistDir:   filepath.Join(dir, "persist"),
		Debounce:           50 * time.Millisecond,
	}, LogToFile: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := cluster.Report(devcluster.CheckRecount(m.Run()))
	if err := cluster.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the cluster:", err)
		return 1
	}
	return code
}

// keyPair makes an RSA key pair: the private key PEM into *priv, the public key PEM returned.
func keyPair(priv *string) (pub string, err error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return "", err
	}
	*priv = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), nil
}

// writeWhitelist writes a whitelist bundle allowing exprs, signed with key unless key is empty,
// atomically (the manager polls the file).
func writeWhitelist(path string, key string, exprs ...string) error {
	rules := []any{map[string]any{"allowedAnnotationKeyExprs": toAny(exprs)}}
	b := bundles.DataBundle("whitelist", "", map[string]any{"rules": rules})
	if key != "" {
		if err := bundles.Sign(b, key, "RS256", ""); err != nil {
			return err
		}
	}
	f, err := os.CreateTemp(filepath.Dir(path), "bundle-*.tar.gz")
	if err != nil {
		return err
	}
	if err := bundles.Write(f, b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func toAny(xs []string) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}
