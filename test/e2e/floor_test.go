package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarops/sidecarops/webhook"
)

// floorLabel marks the pods (in excludedNamespace, where our webhook is never called) that the floor
// webhook injects.
const floorLabel = "bench.sidecarops.io/floor"

// floorWebhook answers every pod admission with the patch our pod webhook gave the first pod it
// saw — the same patch for the same pod shape — and does nothing else: no decision, no mutation,
// no decoding beyond the uid. Registered beside ours, it measures what any injecting webhook costs
// on this machine whatever it does inside (the API server encoding the review, TLS and HTTP both
// ways, decoding the answer, applying and validating the patch): the floor under our overhead.
type floorWebhook struct {
	upstream string
	client   *http.Client

	mu    sync.Mutex
	patch []byte // base64, as in our answer
}

func (f *floorWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	patch, err := f.patchFor(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	uid := gjson.GetBytes(body, "request.uid").String()
	out := make([]byte, 0, 160+len(patch))
	out = append(out, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":`...)
	out = strconv.AppendQuote(out, uid)
	out = append(out, `,"allowed":true,"patchType":"JSONPatch","patch":"`...)
	out = append(out, patch...)
	out = append(out, `"}}`...)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// patchFor is the patch our webhook answered the first review with, asking it on the first call.
func (f *floorWebhook) patchFor(review []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.patch != nil {
		return f.patch, nil
	}
	resp, err := f.client.Post(f.upstream, "application/json", bytes.NewReader(review))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	patch := gjson.GetBytes(answer, "response.patch").String()
	if _, err := base64.StdEncoding.DecodeString(patch); err != nil || patch == "" {
		return nil, fmt.Errorf("our webhook answered no patch (%w): %s", err, answer)
	}
	f.patch = []byte(patch)
	return f.patch, nil
}

// startFloorWebhook serves a floorWebhook over TLS as ours is served (envtest's certificate,
// HTTP/1.1), registers it for the pods labelled floorLabel in excludedNamespace, and waits until the
// API server calls it.
func startFloorWebhook(b *testing.B) {
	b.Helper()
	wio := cluster.Env.WebhookInstallOptions
	cert, err := tls.LoadX509KeyPair(filepath.Join(wio.LocalServingCertDir, "tls.crt"), filepath.Join(wio.LocalServingCertDir, "tls.key"))
	if err != nil {
		b.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(wio.LocalServingCAData) {
		b.Fatal("envtest's webhook CA does not parse")
	}
	floor := &floorWebhook{
		upstream: "https://" + net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort)) + webhook.PodPath,
		client:   &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}},
	}
	srv := httptest.NewUnstartedServer(floor)
	srv.Listener.Close()
	if srv.Listener, err = net.Listen("tcp", net.JoinHostPort(wio.LocalServingHost, "0")); err != nil {
		b.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	srv.StartTLS()
	b.Cleanup(srv.Close)

	ctx := context.Background()
	cfg := &admissionregv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-bench-floor"},
		Webhooks: []admissionregv1.MutatingWebhook{{
			Name:                    "floor.bench.sidecarops.io",
			AdmissionReviewVersions: []string{"v1"},
			ClientConfig:            admissionregv1.WebhookClientConfig{URL: ptr.To(srv.URL + "/"), CABundle: wio.LocalServingCAData},
			Rules: []admissionregv1.RuleWithOperations{{
				Operations: []admissionregv1.OperationType{admissionregv1.Create},
				Rule:       admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Scope: ptr.To(admissionregv1.NamespacedScope)},
			}},
			// As ours is registered (config/webhook).
			ReinvocationPolicy: ptr.To(admissionregv1.IfNeededReinvocationPolicy),
			MatchPolicy:        ptr.To(admissionregv1.Equivalent),
			SideEffects:        ptr.To(admissionregv1.SideEffectClassNone),
			TimeoutSeconds:     ptr.To[int32](3),
			FailurePolicy:      ptr.To(admissionregv1.Fail),
			NamespaceSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": excludedNamespace}},
			ObjectSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{floorLabel: "true"}},
		}},
	}
	if err := cluster.Client.Create(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cluster.Client.Delete(ctx, cfg) })

	probe := pod(excludedNamespace, "floor-probe", map[string]string{"app": "bench", floorLabel: "true"})
	deadline := time.Now().Add(timeout)
	for {
		c := probe.DeepCopy()
		err := cluster.Client.Create(ctx, c, client.DryRunAll)
		if err == nil && len(c.Spec.Containers) == 2 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatal(errors.Join(errors.New("the API server never called the floor webhook"), err))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
