package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/internal/testing/devcluster"
	"github.com/sidecarops/sidecarops/manager"
)

func TestSelfManagedCertificates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The configurations as shipped (service references), installed by hand: envtest would rewrite
	// them to point at a URL with its own CA.
	c, err := devcluster.Start(ctx, devcluster.Options{
		Root: "../..", SkipWebhookConfigurations: true, SelfManagedCerts: true,
		BeforeManager: func(cl client.Client, mo manager.Options) error {
			if err := applyWebhookConfigurations(ctx, cl); err != nil {
				return err
			}
			go mountSecret(ctx, cl, mo.CertDir)
			return nil
		},
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Stop()) }()

	var secret corev1.Secret
	require.NoError(t, c.Client.Get(ctx, client.ObjectKey{Namespace: devcluster.Namespace, Name: manager.CertSecretName}, &secret))
	ca := secret.Data["ca.crt"]
	require.NotEmpty(t, ca)
	require.NotEmpty(t, secret.Data["tls.crt"])

	// The files the webhook server loaded are the Secret's.
	onDisk, err := os.ReadFile(filepath.Join(c.Manager.CertDir, "tls.crt"))
	require.NoError(t, err)
	assert.Equal(t, secret.Data["tls.crt"], onDisk)

	// The CA is injected into every webhook of both configurations, and into the CRD's conversion
	// webhook.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var m admissionregv1.MutatingWebhookConfiguration
		var v admissionregv1.ValidatingWebhookConfiguration
		require.NoError(t, c.Client.Get(ctx, client.ObjectKey{Name: manager.WebhookConfigurationName}, &m))
		require.NoError(t, c.Client.Get(ctx, client.ObjectKey{Name: manager.WebhookConfigurationName}, &v))
		var bundles [][]byte
		for _, w := range m.Webhooks {
			bundles = append(bundles, w.ClientConfig.CABundle)
		}
		for _, w := range v.Webhooks {
			bundles = append(bundles, w.ClientConfig.CABundle)
		}
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		require.NoError(t, c.Client.Get(ctx, client.ObjectKey{Name: manager.CRDName}, crd))
		if b64, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle"); b64 != "" {
			b, err := base64.StdEncoding.DecodeString(b64)
			require.NoError(t, err)
			bundles = append(bundles, b)
		}
		injected := len(bundles) == 4
		for _, b := range bundles {
			injected = injected && string(b) == string(ca)
		}
		if injected {
			break
		}
		require.True(t, time.Now().Before(deadline), "caBundle not injected into all 3 webhooks and the CRD's conversion")
		time.Sleep(200 * time.Millisecond)
	}

	// The webhook server presents a certificate for the Service's DNS name that the CA verifies, over
	// TLS 1.2 or newer.
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca))
	addr := net.JoinHostPort(c.Manager.WebhookHost, strconv.Itoa(c.Manager.WebhookPort))
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: manager.ServiceName + "." + devcluster.Namespace + ".svc", MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	_, err = tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11}) // #nosec G402 -- must be refused
	assert.Error(t, err, "TLS 1.1 must be refused")
}

// mountSecret does the kubelet's part, absent from envtest: it keeps the certificate Secret's keys as
// files in dir, as the Deployment's secret volume does in a cluster (cert-controller writes the
// Secret and waits for the files to match it).
func mountSecret(ctx context.Context, cl client.Client, dir string) {
	for ctx.Err() == nil {
		var s corev1.Secret
		if err := cl.Get(ctx, client.ObjectKey{Namespace: devcluster.Namespace, Name: manager.CertSecretName}, &s); err == nil {
			for k, v := range s.Data {
				if cur, err := os.ReadFile(filepath.Join(dir, k)); err != nil || string(cur) != string(v) {
					_ = os.WriteFile(filepath.Join(dir, k), v, 0o600)
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// applyWebhookConfigurations creates what config/ ships for the rotator: the webhook configurations
// and the (empty) certificate Secret.
func applyWebhookConfigurations(ctx context.Context, cl client.Client) error {
	raw, err := os.ReadFile("../../config/manager/cert-secret.yaml")
	if err != nil {
		return err
	}
	var secret corev1.Secret
	if err := yaml.Unmarshal(raw, &secret); err != nil {
		return err
	}
	if err := cl.Create(ctx, &secret); err != nil {
		return err
	}
	f, err := os.Open("../../config/webhook/manifests.yaml")
	if err != nil {
		return err
	}
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	var m admissionregv1.MutatingWebhookConfiguration
	var v admissionregv1.ValidatingWebhookConfiguration
	if err := dec.Decode(&m); err != nil {
		return err
	}
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if err := cl.Create(ctx, &m); err != nil {
		return err
	}
	return cl.Create(ctx, &v)
}
